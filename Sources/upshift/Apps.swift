import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct Apps: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, edit and list apps.", subcommands: [Create.self, Edit.self, Show.self, List.self])

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

    struct Edit: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Edit an app: its name, default locale, and per platform store URL, store id and bundle id.",
            discussion: """
                Only what you give changes (as PATCH /v1/apps/{app}, a JSON merge patch). Example:
                upshift apps edit --app notes --store-id ios=1234567890 --bundle-id ios=com.example.notes --reason "Siren"
                """)
        @Option(help: "The app id.") var app: String
        @Option(help: "A new display name.") var name: String?
        @Option(help: "A new locale of release notes used when none matches.") var defaultLocale: String?
        @Option(help: "Set a platform's store URL, as platform=url (repeatable).") var updateUrl: [String] = []
        @Option(help: "Remove a platform's store URL (repeatable).") var removeUpdateUrl: [String] = []
        @Option(help: "Set a platform's store id, as platform=id (repeatable).") var storeId: [String] = []
        @Option(help: "Remove a platform's store id (repeatable).") var removeStoreId: [String] = []
        @Option(help: "Set a platform's bundle or package id, as platform=id (repeatable).") var bundleId: [String] = []
        @Option(help: "Remove a platform's bundle id (repeatable).") var removeBundleId: [String] = []
        @Option(help: "Edit only if the app is still at this revision (what GET sends as ETag); default: as read.")
        var revision: Int?
        @Option(help: "Why (recorded in the app's history).") var reason: String?

        /// The merge patch these options make.
        func patch() throws -> JSONValue {
            var body: [String: JSONValue] = [:]
            if let name { body["name"] = .string(name) }
            if let defaultLocale { body["defaultLocale"] = .string(defaultLocale) }
            for (key, set, remove, option, value) in [
                ("updateURL", updateUrl, removeUpdateUrl, "--update-url", "url"), ("storeId", storeId, removeStoreId, "--store-id", "id"),
                ("bundleId", bundleId, removeBundleId, "--bundle-id", "id"),
            ] where !set.isEmpty || !remove.isEmpty {
                var map = try Create.platformMap(set, option: option, value: value).objectValue ?? [:]
                for platform in remove { map[platform] = .null }
                body[key] = .object(map)
            }
            if let reason { body["reason"] = .string(reason) }
            return .object(body)
        }

        func run() async throws {
            let body = try patch()
            _ = try CatalogCommand.validated { () throws(FieldError) in try CatalogInput.appPatch(body, to: AppInfo(id: "app", name: "-")) }
            let (app, revision, reason) = (app, revision, reason)
            let write = try await CatalogCommand.run { catalog in
                let appId = try AppID.named(app)
                guard let current = try await catalog.apps(id: appId).first else { throw CatalogError.appNotFound(app) }
                return try await catalog.updateApp(
                    appId: appId, expectedRevision: revision ?? current.revision, actor: CatalogCommand.actor, reason: reason,
                    now: SystemClock().now()
                ) { old in
                    do throws(FieldError) { return try CatalogInput.appPatch(body, to: old) } catch {
                        throw CatalogError.invalid(error)
                    }
                }
            }
            print("app \(app) is now at revision \(write.revision)")
            for warning in write.warnings { print("warning: \(warning)") }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one app; exits non-zero when it does not exist.")
        @Argument(help: "The app id.") var id: String

        func run() async throws {
            let id = id
            let apps = try await CatalogCommand.run { catalog in
                guard let id = AppID(validating: id) else { return [AppInfo]() }  // text that is no app id names no app
                return try await catalog.apps(id: id)
            }
            guard let app = apps.first else { throw CommandFailure(description: "no app \(id)") }
            print("\(app.id)\t\(app.name)\tdefault locale \(app.defaultLocale)\trevision \(app.revision)")
            for platform in Set(app.updateURL.keys).union(app.storeId.keys).union(app.bundleId.keys).sorted() {
                let fields = [
                    app.updateURL[platform], app.storeId[platform].map { "store id \($0)" },
                    app.bundleId[platform].map { "bundle id \($0)" },
                ].compactMap { $0 }
                print("  \(platform)\t\(fields.joined(separator: "\t"))")
            }
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

