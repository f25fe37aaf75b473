import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create and list apps.", subcommands: [Create.self, Show.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create an app.")
        @Option(help: "The app id: lowercase letters, digits and -, e.g. expenses.") var id: String
        @Option(help: "A display name.") var name: String
        @Option(help: "Locale of release notes used when none matches (default en).") var defaultLocale = "en"
        @Option(help: "Store URL of a platform, as platform=url (repeatable), e.g. ios=https://apps.apple.com/app/id1")
        var updateUrl: [String] = []
        @Option(help: "Store id of a platform, as platform=id (repeatable), e.g. ios=1234567890 (the lookup's trackId).")
        var storeId: [String] = []
        @Option(help: "Bundle or package id of a platform, as platform=id (repeatable), e.g. ios=com.example.notes.")
        var bundleId: [String] = []
        @Option(help: "Why (recorded in the app's history).") var reason: String?

        func run() async throws {
            var body: [String: JSONValue] = [
                "id": .string(id), "name": .string(name), "defaultLocale": .string(defaultLocale),
            ]
            body["updateURL"] = try Self.platformMap(updateUrl, option: "--update-url", value: "url")
            body["storeId"] = try Self.platformMap(storeId, option: "--store-id", value: "id")
            body["bundleId"] = try Self.platformMap(bundleId, option: "--bundle-id", value: "id")
            let app = try CatalogCommand.validated { () throws(FieldError) in try CatalogInput.app(.object(body)) }
            let reason = reason
            let created = try await CatalogCommand.run { catalog in
                try await catalog.createApp(app, actor: CatalogCommand.actor, reason: reason, now: SystemClock().now())
            }
            print("created app \(created.id)")
        }

        /// `platform=value` entries as the JSON object the admin API takes.
        static func platformMap(_ entries: [String], option: String, value: String) throws -> JSONValue {
            var map: [String: JSONValue] = [:]
            for entry in entries {
                let parts = entry.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { throw ValidationError("\(option) takes platform=\(value)") }
                map[String(parts[0])] = .string(String(parts[1]))
            }
            return .object(map)
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one app; exits non-zero when it does not exist.")
        @Argument(help: "The app id.") var id: String

        func run() async throws {
            let id = id
            let apps = try await CatalogCommand.run { catalog in try await catalog.apps(id: id) }
            guard let app = apps.first else { throw CommandFailure(description: "no app \(id)") }
            print("\(app.id)\t\(app.name)\tdefault locale \(app.defaultLocale)")
            for (platform, url) in app.updateURL.sorted(by: { $0.key < $1.key }) { print("  \(platform)\t\(url)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List apps.")

        func run() async throws {
            let apps = try await CatalogCommand.run { catalog in try await catalog.apps() }
            for app in apps { print("\(app.id)\t\(app.name)") }
        }
    }
}

