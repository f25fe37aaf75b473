import Foundation
import Logging
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
    /// they were, when they were loaded before. A load of an older catalog version than the one held
    /// changes nothing and returns false: reloads (after a write, on a NOTIFY, by the poll) run
    /// concurrently and can finish out of order. Nor does a load of the version held (the stored
    /// catalog is the same, as every write raises the version): the cached answers stay valid.
    @discardableResult
    func replace(apps: [String: AppCatalog], version: Int64, keeping: some Sequence<String> = []) -> Bool {
        let entries = apps.mapValues { Entry(catalog: $0, timing: CheckTiming($0), generation: 0) }
        return state.withLock { state in
            guard !state.loaded || version > state.version else { return false }
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
            return true
        }
    }
}

