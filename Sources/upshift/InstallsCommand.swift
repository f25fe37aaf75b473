import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftStore

struct InstallsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "installs", abstract: "Erase an install's events and figures (docs/OPERATIONS.md, \"Erasure\").",
        subcommands: [Forget.self, Erasure.self])

    struct Forget: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: """
                Request the erasure of an install: prints the request's id and status. A running `upshift serve` \
                with the projections role carries it out; a repeat while it is open answers the same request.
                """)
        @Option(help: "The app's id.") var app: String
        @Option(help: "The install id (a UUID), as the SDK's forget() returns it.") var install: String
        @Option(help: "Wait up to this many seconds for it to be done (exit 1 if it is not).") var wait: Int?

        func validate() throws {
            guard AppID(validating: app) != nil else { throw ValidationError("--app: \(app) is not an app id") }
            guard UUID(uuidString: install) != nil else { throw ValidationError("--install: \(install) is not a UUID") }
            if let wait, wait < 0 { throw ValidationError("--wait: seconds cannot be negative") }
        }

        func run() async throws {
            guard let app = AppID(validating: app), let install = UUID(uuidString: install) else { return }
            let erasure = try await withDatabase { pool, logger in
                guard try await CatalogStore(pool: pool, logger: logger).app(id: app) != nil else {
                    throw CommandFailure(description: "no app \(app)")
                }
                return try await ErasureStore(pool: pool, logger: logger).request(app: app, install: install, at: SystemClock().now())
            }
            print("erasure \(erasure.id.uuidString.lowercased()) \(erasure.status.rawValue)")
            guard let wait else { return }
            try await Erasure.waitUntilDone(app: app, id: erasure.id, seconds: wait)
        }
    }

    struct Erasure: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show an erasure request: pending or done.")
        @Option(help: "The app's id.") var app: String
        @Argument(help: "The request's id.") var id: String
        @Option(help: "Wait up to this many seconds for it to be done (exit 1 if it is not).") var wait: Int?

        func validate() throws {
            guard AppID(validating: app) != nil else { throw ValidationError("--app: \(app) is not an app id") }
            guard UUID(uuidString: id) != nil else { throw ValidationError("\(id) is not an erasure id (a UUID)") }
        }

        func run() async throws {
            guard let app = AppID(validating: app), let id = UUID(uuidString: id) else { return }
            try await Self.waitUntilDone(app: app, id: id, seconds: wait ?? 0, quietWhilePending: wait != nil)
        }

        /// Prints the request once done (or as it is, after `seconds` or at once with 0); exit 1 when it
        /// is still pending after waiting.
        static func waitUntilDone(app: AppID, id: UUID, seconds: Int, quietWhilePending: Bool = true) async throws {
            let deadline = ContinuousClock.now + .seconds(seconds)
            while true {
                let found = try await withDatabase { pool, logger in
                    try await ErasureStore(pool: pool, logger: logger).erasure(app: app, id: id)
                }
                guard let erasure = found else { throw CommandFailure(description: "no erasure \(id.uuidString.lowercased()) of app \(app)") }
                let done = erasure.status == .done
                if done || ContinuousClock.now >= deadline || !quietWhilePending {
                    print(
                        [erasure.id.uuidString.lowercased(), erasure.status.rawValue, "install sha256 \(erasure.installSHA256)",
                         "requested \(Timestamp.format(erasure.requestedAt))",
                         erasure.events.map { "\($0) events erased" } ?? "log not yet erased",
                         erasure.doneAt.map { "done \(Timestamp.format($0))" } ?? "figures not yet corrected",
                        ].joined(separator: "\t"))
                }
                if done { return }
                if ContinuousClock.now >= deadline {
                    if seconds > 0 { throw CommandFailure(description: "erasure \(id.uuidString.lowercased()) is still pending") }
                    return
                }
                try await Task.sleep(for: .milliseconds(500))
            }
        }
    }
}
