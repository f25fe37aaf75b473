import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Keeps the snapshot current: a dedicated LISTEN connection reloads on every catalog NOTIFY (and on
/// every reconnect, to catch up on what it missed), and a poll of the catalog version every second is
/// the fallback. While the database is away the snapshot stays as it was and checks keep answering.
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
        undecodable = ServerMetrics.gauge("catalog_apps_undecodable", factory: metrics)
        catalogVersion = ServerMetrics.gauge("catalog_version", factory: metrics)
    }

    /// Loads the snapshot once (before the server starts).
    func load() async throws {
        let version = try await store.version()
        install(try await store.loadAll(), version: version)
        readiness.mark(.catalog)
    }

    /// Takes a load into the snapshot, unless a load of the same or a newer catalog version finished
    /// first (then false). An app that could not be read keeps its last good catalog (or is absent until it can be
    /// read) while every other app is served as stored.
    @discardableResult
    func install(_ load: CatalogStore.Load, version: Int64) -> Bool {
        guard snapshot.replace(apps: load.apps, version: version, keeping: load.undecodable.keys) else { return false }
        for (app, reason) in load.undecodable.sorted(by: { $0.key < $1.key }) {
            logger.error(
                "an app's stored catalog cannot be read; its last good catalog is kept",
                metadata: ["app.id": "\(app)", "error": "\(reason)"])
        }
        undecodable.set(Double(load.undecodable.count))
        catalogVersion.set(Double(version))
        return true
    }

    func run() async throws {
        await withDiscardingTaskGroup { group in
            group.addTask { await listen() }
            group.addTask { await poll() }
        }
    }

    func reload(reason: String) async {
        do {
            let version = try await store.version()
            // The instance that wrote reloads at once and then hears its own NOTIFY: load once.
            if snapshot.isLoaded, version == snapshot.version { return }
            guard install(try await store.loadAll(), version: version) else {
                logger.debug(
                    "catalog reload discarded: this or a newer version is loaded",
                    metadata: ["catalog.version": "\(version)", "catalog.trigger": "\(reason)"])
                return
            }
            readiness.mark(.catalog)
            logger.debug("catalog reloaded", metadata: ["catalog.version": "\(version)", "catalog.trigger": "\(reason)"])
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
            guard let version = try? await withDeadline(.seconds(2), { try await store.version() }) else { continue }
            if version > snapshot.version { await reload(reason: "poll") }
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
