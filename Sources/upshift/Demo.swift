import ArgumentParser
import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftSimulation
import UpshiftStore

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load the app `demo`: releases, a policy and 60 simulated days ending now (once; later runs do nothing).")

    @Option(help: "Installs in the demo fleet.") var installs = 500

    func run() async throws {
        try await migrateDatabase(loadMigrations())
        let (exists, events) = try await withDatabase { pool, logger in
            let exists = try await CatalogStore(pool: pool, logger: logger).app(id: "demo") != nil
            return (exists, try await EventLog(pool: pool, logger: logger).installEventCount(app: "demo"))
        }
        if events > 0 {
            print("demo: the app demo already has its data; nothing to do")
            return
        }
        var options = FleetSimulation.Options(installs: installs, days: 60, seed: 2026, appId: "demo", end: Date(), progress: true)
        options.createApp = !exists
        options.appName = "Demo"
        _ = try await runSimulation(options)
        // The keys the README's walk-through uses: post events for demo, read and change every app.
        let keys = try await withDatabase { pool, logger in
            let store = KeyStore(pool: pool, logger: logger)
            return [
                ("ingest (app demo)", try await store.create(name: "demo-ingest", scope: .ingest, appId: "demo", now: Date()).1),
                ("read   (all apps)", try await store.create(name: "demo-read", scope: .read, appId: nil, now: Date()).1),
                ("admin  (all apps)", try await store.create(name: "demo-admin", scope: .admin, appId: nil, now: Date()).1),
            ]
        }
        print("demo: loaded 60 days of app demo. API keys, shown once (store them now):")
        for (label, secret) in keys { print("  \(label): \(secret)") }
    }
}
