import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Keeps the snapshot current: a dedicated LISTEN connection reloads on every catalog NOTIFY (and on
/// every reconnect, to catch up on what it missed), and a poll of the apps' stream heads every second is
/// the fallback. Each reload reads the heads and loads only the apps whose head moved, so a write costs
/// the app it changed and leaves every other app's cached answers warm. While the database is away the
/// snapshot stays as it was and checks keep answering.
struct CatalogSnapshotService: Service {
    let snapshot: CatalogSnapshot
    let store: CatalogStore
    /// Where the listener opens its own connection.
    let database: DatabaseSettings
    let readiness: Readiness
    let logger: Logger
    /// Apps the last load could not read (each logged as an error, its last good catalog kept).
    let undecodable: Meter
    /// The catalog version the snapshot holds (the sum of the apps' stream heads): instances that serve
    /// the same catalog show the same number.
    let catalogVersion: Meter
    var pollInterval: Duration = .seconds(1)

    init(
        snapshot: CatalogSnapshot, store: CatalogStore, database: DatabaseSettings, readiness: Readiness,
        metrics: any MetricsFactory, logger: Logger
    ) {
        self.snapshot = snapshot
        self.store = store
        self.database = database
        self.readiness = readiness
        self.logger = logger
        undecodable = Meter(label: "upshift_catalog_apps_undecodable", factory: metrics)
        catalogVersion = Meter(label: "upshift_catalog_version", factory: metrics)
    }

    /// Loads the snapshot once (before the server starts).
    func load() async throws {
        try await refresh(reason: "start")
        readiness.mark(.catalog)
    }

    /// Reads every app's stream head and loads the apps whose head moved since the snapshot took them:
    /// a write costs the app it changed, not the catalog. Returns the ids of the apps taken (none when
    /// a concurrent reload took them first).
    @discardableResult
    func refresh(reason: String) async throws -> [AppID] {
        let heads = try await store.heads()
        let moved = snapshot.newer(heads)
        guard !moved.isEmpty || !snapshot.isLoaded else { return [] }
        let load = try await store.load(only: moved.keys.sorted())
        let taken = snapshot.update(apps: load.apps, heads: moved, keeping: Set(load.undecodable.keys))
        for (app, reason) in load.undecodable.sorted(by: { $0.key < $1.key }) {
            logger.error(
                "an app's stored catalog cannot be read; its last good catalog is kept",
                metadata: ["app.id": "\(app)", "error": "\(reason)"])
        }
        undecodable.set(Double(snapshot.undecodableCount))
        catalogVersion.set(Double(snapshot.version))
        logger.debug(
            "catalog reloaded",
            metadata: ["catalog.apps": "\(taken.map(\.rawValue).joined(separator: ","))", "catalog.version": "\(snapshot.version)", "catalog.trigger": "\(reason)"])
        return taken
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await listen() }
            group.addTask { await poll() }
        }
    }

    func reload(reason: String) async {
        do {
            try await refresh(reason: reason)
            readiness.mark(.catalog)
        } catch {
            logger.warning(
                "catalog reload failed; serving the last snapshot", metadata: ["error": "\(DatabaseUnreachable.cause(of: error))"])
        }
    }

    private func listen() async {
        var backoff: Duration = .milliseconds(100)
        while !Task.isCancelledOrShuttingDown {
            let started = ContinuousClock.now
            do {
                try await cancelWhenGracefulShutdown {
                    try await CatalogStore.listen(
                        settings: database, logger: logger,
                        onListening: { await reload(reason: "listen") },  // catch up on what was missed
                        onChange: { _ in await reload(reason: "notify") })
                }
            } catch {
                if Task.isCancelledOrShuttingDown { return }
                logger.warning(
                    "catalog listener lost its connection; reconnecting", metadata: ["error": "\(DatabaseUnreachable.cause(of: error))"])
            }
            if ContinuousClock.now - started > .seconds(30) { backoff = .milliseconds(100) }
            let wait = backoff
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    private func poll() async {
        var behind = 0
        while !Task.isCancelledOrShuttingDown {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
            } catch {
                return
            }
            guard let heads = try? await withDeadline(.seconds(2), { try await store.heads() }) else { continue }
            if !snapshot.newer(heads).isEmpty { await reload(reason: "poll") }
            let version = heads.values.reduce(0, +)
            // The version only grows. A poll that began before a reload finished may read less once; the
            // database reading less on two polls in a row went back (restored from a backup), and the
            // snapshot, which never takes an older version, stays as it is until the instance restarts.
            behind = version < snapshot.version ? behind + 1 : 0
            if behind == 2 {
                logger.error(
                    "the database's catalog is older than the snapshot (restored from a backup?): restart to serve it",
                    metadata: ["catalog.version": "\(version)", "catalog.snapshot.version": "\(snapshot.version)"])
            }
        }
    }
}
