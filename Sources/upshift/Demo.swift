import ArgumentParser
import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftSimulation
import UpshiftStore

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Load the app `sample`: releases, a policy and 60 simulated days ending now (once; later runs say so and do nothing).")

    /// The app the demo data lives in: one of its own, so that whatever other apps hold (the README's first
    /// event goes to `demo`) never keeps the curves from loading.
    static let app: AppID = "sample"

    @Option(help: "Installs in the demo fleet.") var installs = 500

    func run() async throws {
        try await migrateDatabase(loadMigrations())
        let app = Self.app
        let (exists, events) = try await withDatabase { pool, logger in
            let exists = try await CatalogStore(pool: pool, logger: logger).app(id: app) != nil
            return (exists, try await EventLog(pool: pool, logger: logger).installEventCount(app: app))
        }
        if events > 0 {
            print("demo: the app \(app) already has its data; nothing to do (its curves: /dashboard/apps/\(app))")
            return
        }
        var options = FleetSimulation.Options(installs: installs, days: 60, seed: 2026, appId: app, end: Date(), progress: true)
        options.createApp = !exists
        options.appName = "Sample"
        _ = try await runSimulation(options)
        print("demo: loaded 60 days of the app \(app); its curves: /dashboard/apps/\(app) (sign in with a read or admin token)")
    }
}
