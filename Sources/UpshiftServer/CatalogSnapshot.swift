import Foundation
import Logging
import Prometheus
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// The catalog in memory, which the check answers from without touching the database (DESIGN.md 4).
final class CatalogSnapshot: Sendable {
    struct Entry: Sendable {
        var catalog: AppCatalog
        /// When the app's answers change with the clock alone, and whether they depend on the install.
        var timing: CheckTiming
        /// Which load this is: cached answers of an earlier load are not reused.
        var generation: Int
    }

    struct State: Sendable {
        var apps: [String: Entry] = [:]
        /// The catalog version it was loaded at (sum of stream heads).
        var version: Int64 = -1
        var loaded = false
        var generation = 0
    }

    private let state = Mutex(State())

    func app(_ id: String) -> Entry? {
        state.withLock { $0.apps[id] }
    }

    /// Every app's id, in order.
    var appIds: [String] { state.withLock { $0.apps.keys.sorted() } }

    var isLoaded: Bool { state.withLock { $0.loaded } }
    var version: Int64 { state.withLock { $0.version } }

    /// Takes `apps` as the catalog; the apps of `keeping` (which could not be read this time) stay as
    /// they were, when they were loaded before.
    func replace(apps: [String: AppCatalog], version: Int64, keeping: some Sequence<String> = []) {
        let entries = apps.mapValues { Entry(catalog: $0, timing: CheckTiming($0), generation: 0) }
        state.withLock { state in
            state.generation += 1
            let generation = state.generation
            let kept = keeping.compactMap { id in state.apps[id].map { (id, $0) } }
            state.apps = entries.mapValues { entry in
                var entry = entry
                entry.generation = generation
                return entry
            }
            for (id, entry) in kept { state.apps[id] = entry }
            state.version = version
            state.loaded = true
        }
    }
}

/// Keeps the snapshot current: a dedicated LISTEN connection reloads on every catalog NOTIFY (and on
/// every reconnect, to catch up on what it missed), and a poll of the catalog version every second is
/// the fallback. While the database is away the snapshot stays as it was and checks keep answering.
struct CatalogSnapshotService: Service {
    let snapshot: CatalogSnapshot
    let store: CatalogStore
    let readiness: Readiness
    let logger: Logger
    /// Apps the last load could not read (each logged as an error, its last good catalog kept).
    let undecodable: Prometheus.Gauge
    var pollInterval: Duration = .seconds(1)

    init(snapshot: CatalogSnapshot, store: CatalogStore, readiness: Readiness, metrics: PrometheusCollectorRegistry, logger: Logger) {
        self.snapshot = snapshot
        self.store = store
        self.readiness = readiness
        self.logger = logger
        undecodable = metrics.gauge(
            "catalog_apps_undecodable", help: "apps whose stored catalog the last load could not read (left as they were)")
    }

    /// Loads the snapshot once (before the server starts).
    func load() async throws {
        let version = try await store.version()
        install(try await store.loadAll(), version: version)
        readiness.mark("catalog")
    }

    /// Takes a load into the snapshot. An app that could not be read keeps its last good catalog (or
    /// is absent until it can be read) while every other app is served as stored.
    private func install(_ load: CatalogStore.Load, version: Int64) {
        for (app, reason) in load.undecodable.sorted(by: { $0.key < $1.key }) {
            logger.error(
                "an app's stored catalog cannot be read; its last good catalog is kept",
                metadata: ["app.id": "\(app)", "error": "\(reason)"])
        }
        undecodable.set(Double(load.undecodable.count))
        snapshot.replace(apps: load.apps, version: version, keeping: load.undecodable.keys)
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
            install(try await store.loadAll(), version: version)
            readiness.mark("catalog")
            logger.debug("catalog reloaded", metadata: ["catalog.version": "\(version)", "catalog.trigger": "\(reason)"])
        } catch {
            logger.warning("catalog reload failed; serving the last snapshot", metadata: ["error": "\(error)"])
        }
    }

    private func listen() async {
        var backoff: Duration = .milliseconds(100)
        while !Task.isCancelledOrShuttingDown {
            let started = ContinuousClock.now
            do {
                try await cancelWhenGracefulShutdown {
                    try await store.listen(
                        onListening: { await reload(reason: "listen") },  // catch up on what was missed
                        onChange: { _ in await reload(reason: "notify") })
                }
            } catch {
                if Task.isCancelledOrShuttingDown { return }
                logger.warning("catalog listener lost its connection; reconnecting", metadata: ["error": "\(error)"])
            }
            if ContinuousClock.now - started > .seconds(30) { backoff = .milliseconds(100) }
            let wait = backoff
            try? await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
            backoff = min(backoff * 2, .seconds(5))
        }
    }

    private func poll() async {
        while !Task.isCancelledOrShuttingDown {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: pollInterval) }
            } catch {
                return
            }
            guard let version = try? await withDeadline(.seconds(2), { try await store.version() }) else { continue }
            if version != snapshot.version { await reload(reason: "poll") }
        }
    }
}
