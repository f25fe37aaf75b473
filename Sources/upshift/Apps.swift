import ArgumentParser
import Foundation
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
        @Option(help: "Why (recorded in the app's history).") var reason: String?

        func run() async throws {
            let (id, name, locale, reason) = (id, name, defaultLocale, reason)
            do {
                let app = try await withDatabase { client, logger in
                    try await AppStore(client: client, logger: logger).create(
                        id: id, name: name, defaultLocale: locale, actor: "cli:\(NSUserName())", reason: reason,
                        now: SystemClock().now())
                }
                print("created app \(app.id)")
            } catch let error as AppStoreError {
                throw CommandFailure(description: error.description)
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show one app; exits non-zero when it does not exist.")
        @Argument(help: "The app id.") var id: String

        func run() async throws {
            let id = id
            guard let app = try await withDatabase({ client, logger in try await AppStore(client: client, logger: logger).find(id: id) })
            else { throw CommandFailure(description: "no app \(id)") }
            print("\(app.id)\t\(app.name)\tdefault locale \(app.defaultLocale)")
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List apps.")

        func run() async throws {
            let apps = try await withDatabase { client, logger in try await AppStore(client: client, logger: logger).list() }
            for app in apps { print("\(app.id)\t\(app.name)") }
        }
    }
}
