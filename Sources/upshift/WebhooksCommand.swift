import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks", abstract: "Webhook subscriptions of an app (docs/OPERATIONS.md, \"Webhooks\").",
        subcommands: [Create.self, List.self, Remove.self, Rotate.self, Enable.self, Test.self, Deliveries.self])

    /// The app and a subscription's id, as every command but `create` and `list` takes them.
    struct Subscription: ParsableArguments {
        @Option(help: "The app's id.") var app: String
        @Argument(help: "The subscription's id.") var id: String

        func validate() throws {
            guard AppID(validating: app) != nil else { throw ValidationError("--app: \(app) is not an app id") }
            guard UUID(uuidString: id) != nil else { throw ValidationError("\(id) is not a webhook id (a UUID)") }
        }

        /// Runs `body` on the store, failing with a message when the subscription does not exist.
        func run<T: Sendable>(_ body: @escaping @Sendable (WebhookStore, AppID, UUID) async throws -> T) async throws -> T {
            guard let app = AppID(validating: app), let id = UUID(uuidString: id) else { throw ValidationError("--app or id") }
            return try await withDatabase { pool, logger in
                do {
                    return try await body(WebhookStore(pool: pool, logger: logger), app, id)
                } catch WebhookStore.Failure.notFound {
                    throw CommandFailure(description: "no webhook \(id.uuidString.lowercased()) of app \(app)")
                }
            }
        }
    }

    static func line(_ webhook: Webhook) -> String {
        let state = webhook.enabled ? "enabled" : "disabled (\(webhook.disabledReason ?? "no reason"))"
        let kinds = webhook.kinds.map(\.rawValue).joined(separator: ",")
        let percents = webhook.thresholds.map { $0 == $0.rounded() ? String(Int($0)) : String($0) }
        let thresholds = percents.isEmpty ? "" : " thresholds=" + percents.joined(separator: ",")
        return "\(webhook.id.uuidString.lowercased()) \(webhook.url) \(kinds)\(thresholds) \(webhook.format.rawValue) \(state)"
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: """
                Subscribe a URL to kinds of what Upshift decides: prints the subscription and its secret, shown \
                this once. The URL is checked as the server checks it (UPSHIFT_WEBHOOK_ALLOW_HTTP, \
                UPSHIFT_WEBHOOK_ALLOW_PRIVATE).
                """)
        @Option(help: "The app's id.") var app: String
        @Option(help: "Where deliveries go: an https URL.") var url: String
        @Option(name: .customLong("kind"), help: "A kind to deliver (repeat): \(WebhookKind.allCases.map(\.rawValue).joined(separator: ", ")).")
        var kinds: [String] = []
        @Option(help: "json (signed; the default) or slack (a Slack incoming webhook's body, unsigned).") var format = "json"
        @Option(
            name: .customLong("threshold"),
            help: "A share of active installs, in percent, whose crossing adoption.crossed tells (repeat; required with that kind).")
        var thresholds: [String] = []

        func validate() throws {
            guard AppID(validating: app) != nil else { throw ValidationError("--app: \(app) is not an app id") }
            guard !kinds.isEmpty else { throw ValidationError("--kind: name at least one kind") }
            for kind in kinds where WebhookKind(rawValue: kind) == nil {
                throw ValidationError("--kind: \(kind) is not a kind (\(WebhookKind.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            guard Set(kinds).count == kinds.count else { throw ValidationError("--kind: a kind is named twice") }
            guard WebhookFormat(rawValue: format) != nil else { throw ValidationError("--format: json or slack") }
            _ = try checkedThresholds()
        }

        func checkedThresholds() throws -> [Double] {
            do {
                return try AdoptionCrossing.thresholds(
                    thresholds.isEmpty ? nil : thresholds, kinds: kinds.compactMap(WebhookKind.init(rawValue:)))
            } catch {
                throw ValidationError("--threshold: \(error)")
            }
        }

        func run() async throws {
            guard let app = AppID(validating: app) else { return }
            let settings: WebhookSettings
            do {
                settings = try AppConfiguration.webhookSettings(ProcessInfo.processInfo.environment)
            } catch {
                throw ValidationError("\(error)")
            }
            do {
                try await settings.check(url)
            } catch {
                throw ValidationError("--url: \(error)")
            }
            let kinds = kinds.compactMap(WebhookKind.init(rawValue:))
            let format = WebhookFormat(rawValue: format) ?? .json
            let thresholds = try checkedThresholds()
            let (webhook, secret) = try await withDatabase { [url] pool, logger in
                do {
                    return try await WebhookStore(pool: pool, logger: logger).create(
                        app: app, url: url, kinds: kinds, format: format, thresholds: thresholds, now: SystemClock().now())
                } catch WebhookStore.Failure.tooMany {
                    throw CommandFailure(description: "an app has at most \(WebhookStore.perApp) webhooks: remove one first")
                } catch CatalogError.appNotFound {
                    throw CommandFailure(description: "no app \(app)")
                }
            }
            print(WebhooksCommand.line(webhook))
            print("secret \(secret)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an app's subscriptions (never their secrets).")
        @Option(help: "The app's id.") var app: String

        func validate() throws {
            guard AppID(validating: app) != nil else { throw ValidationError("--app: \(app) is not an app id") }
        }

        func run() async throws {
            guard let app = AppID(validating: app) else { return }
            let webhooks = try await withDatabase { pool, logger in try await WebhookStore(pool: pool, logger: logger).list(app: app) }
            for webhook in webhooks { print(WebhooksCommand.line(webhook)) }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a subscription and its deliveries.")
        @OptionGroup var subscription: Subscription

        func run() async throws {
            try await subscription.run { store, app, id in
                guard try await store.delete(app: app, id: id) else { throw WebhookStore.Failure.notFound }
            }
            print("removed \(subscription.id.lowercased())")
        }
    }

    struct Rotate: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A new secret, printed this once; the previous one signs too for 24 hours.")
        @OptionGroup var subscription: Subscription

        func run() async throws {
            let (webhook, secret) = try await subscription.run { store, app, id in try await store.rotate(app: app, id: id, now: SystemClock().now()) }
            print(WebhooksCommand.line(webhook))
            print("secret \(secret)")
        }
    }

    struct Enable: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Enable a subscription disabled after a day of failures.")
        @OptionGroup var subscription: Subscription

        func run() async throws {
            print(WebhooksCommand.line(try await subscription.run { store, app, id in try await store.enable(app: app, id: id) }))
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue a webhook.test delivery to a subscription: a running `upshift serve` sends it.")
        @OptionGroup var subscription: Subscription

        func run() async throws {
            let delivery = try await subscription.run { store, app, id in try await store.test(app: app, id: id, now: SystemClock().now()) }
            print("delivery \(delivery.uuidString.lowercased()) pending")
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A subscription's newest deliveries and their attempts.")
        @OptionGroup var subscription: Subscription
        @Option(help: "How many deliveries (1-500).") var limit = 20

        func validate() throws {
            guard (1...500).contains(limit) else { throw ValidationError("--limit must be from 1 to 500") }
        }

        func run() async throws {
            let limit = limit
            let deliveries = try await subscription.run { store, app, id in
                guard try await store.webhook(app: app, id: id) != nil else { throw WebhookStore.Failure.notFound }
                return try await store.deliveries(app: app, webhook: id, limit: limit)
            }
            for delivery in deliveries {
                print("\(delivery.id.uuidString.lowercased()) \(delivery.kind) \(delivery.state) \(Timestamp.format(delivery.createdAt))")
                for attempt in delivery.attempts {
                    let result = attempt.status.map { "status \($0)" } ?? attempt.error ?? "no answer"
                    print("  attempt \(attempt.attempt) \(Timestamp.format(attempt.at)) \(attempt.durationMilliseconds) ms: \(result)")
                }
            }
        }
    }
}
