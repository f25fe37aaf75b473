import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

extension KeyScope: ExpressibleByArgument {}

struct Keys: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create, list and revoke ingest keys and read/admin tokens.",
        subcommands: [Create.self, List.self, Revoke.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create a key; prints its secret alone on the last line, once (only its SHA-256 is stored).")
        @Option(help: "ingest (one app, for apps to post events), read (reports) or admin (catalog, policy, keys).")
        var scope: KeyScope
        @Option(help: "A label, e.g. ios-app or ci-reports.") var name: String
        @Option(help: "The app it covers; required for ingest keys, omit for a token covering every app.") var app: String?

        func validate() throws {
            if scope == .ingest, app == nil { throw ValidationError("an ingest key belongs to one app: pass --app") }
        }

        func run() async throws {
            let (scope, name, app) = (scope, name, app)
            do {
                let (key, secret) = try await withDatabase { pool, logger in
                    // Text that is no app id names no app.
                    let appId = try app.map { text in
                        guard let app = AppID(validating: text) else { throw KeyStoreError.unknownApp(text) }
                        return app
                    }
                    return try await KeyStore(pool: pool, logger: logger).create(
                        name: name, scope: scope, appId: appId, now: SystemClock().now())
                }
                let covered = key.appId?.rawValue ?? "every app"
                print("created \(key.scope.rawValue) key \(key.name) (\(key.id.uuidString.lowercased())) for \(covered)")
                print("the secret is shown once; store it now:")
                print(secret)
            } catch let error as KeyStoreError {
                throw CommandFailure(description: error.description)
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List keys (never their secrets).")

        func run() async throws {
            let keys = try await withDatabase { pool, logger in try await KeyStore(pool: pool, logger: logger).list() }
            print("id\tscope\tname\tapp\tcreated\trevoked")
            for key in keys {
                print(
                    [key.id.uuidString.lowercased(), key.scope.rawValue, key.name, key.appId?.rawValue ?? "*",
                     Timestamp.format(key.createdAt), key.revokedAt.map(Timestamp.format) ?? "-"].joined(separator: "\t"))
            }
        }
    }

    struct Revoke: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Revoke a key by id or name; every instance refuses it within its key cache time (10 s).")
        @Argument(help: "The key's id or name.") var key: String

        func run() async throws {
            let idOrName = key
            do {
                let key = try await withDatabase { pool, logger in
                    try await KeyStore(pool: pool, logger: logger).revoke(idOrName, now: SystemClock().now())
                }
                print("revoked \(key.scope.rawValue) key \(key.name) (\(key.id.uuidString.lowercased()))")
            } catch let error as KeyStoreError {
                throw CommandFailure(description: error.description)
            }
        }
    }
}
