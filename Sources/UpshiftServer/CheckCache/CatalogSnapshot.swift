import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// The catalog in memory, which the check answers from without touching the database (docs/ARCHITECTURE.md
/// §7, "The check path").
final class CatalogSnapshot: Sendable {
    struct Entry: Sendable {
        var catalog: AppCatalog
        /// When the app's answers change with the clock alone, and whether they depend on the install.
        var timing: CheckTiming
        /// Which load this is: cached answers of an earlier load are not reused.
        var generation: Int
    }

    struct State: Sendable {
        var apps: [AppID: Entry] = [:]
        /// Each app's stream head as last loaded (also for an app that could not be read, so that it is
        /// not read again until it changes).
        var heads: [AppID: Int64] = [:]
        /// Apps whose last load could not be read (their last good catalog, if any, is served).
        var undecodable: Set<AppID> = []
        /// The sum of `heads`: the catalog version instances compare.
        var version: Int64 = -1
        var loaded = false
        var generation = 0
    }

    private let state = Mutex(State())

    func app(_ id: AppID) -> Entry? {
        state.withLock { $0.apps[id] }
    }

    /// The app of the request's path, when it exists (a malformed request is a `400` whether or not it does).
    /// Text that is no app id finds no app.
    func app(in context: UpshiftRequestContext) -> (id: AppID, entry: Entry)? {
        guard let text = try? context.pathValue("app"), let id = AppID(validating: text), let entry = app(id) else { return nil }
        return (id, entry)
    }

    /// Every app's id, in order.
    var appIds: [AppID] { state.withLock { $0.apps.keys.sorted() } }

    var isLoaded: Bool { state.withLock { $0.loaded } }
    var version: Int64 { state.withLock { $0.version } }
    var undecodableCount: Int { state.withLock { $0.undecodable.count } }

    /// Of `heads` (each app's stream head, as just read), those newer than what is held: the apps to load.
    func newer(_ heads: [AppID: Int64]) -> [AppID: Int64] {
        state.withLock { state in heads.filter { app, head in state.heads[app].map { head > $0 } ?? true } }
    }

    /// Takes the catalogs of `apps`, each loaded after its head in `heads` was read. An app whose held
    /// head is as new or newer stays as it is: reloads (after a write, on a NOTIFY, by the poll) run
    /// concurrently and can finish out of order, and the same head means the same catalog. The apps of
    /// `keeping` (which could not be read) keep their last good catalog and take the head, so that they
    /// are not read again until they change. Only the apps taken get a new generation: the cached
    /// answers of every other app stay valid. Returns the ids of the apps taken.
    @discardableResult
    func update(apps: [AppID: AppCatalog], heads: [AppID: Int64], keeping: Set<AppID> = []) -> [AppID] {
        state.withLock { state in
            if !state.loaded { state.version = 0 }
            var taken: [AppID] = []
            for (id, head) in heads.sorted(by: { $0.key < $1.key }) {
                if let held = state.heads[id], held >= head { continue }
                if keeping.contains(id) {
                    state.undecodable.insert(id)
                } else if let catalog = apps[id] {
                    state.generation += 1
                    state.apps[id] = Entry(catalog: catalog, timing: CheckTiming(catalog), generation: state.generation)
                    state.undecodable.remove(id)
                    taken.append(id)
                } else {
                    continue  // a head without an app row (not yet, or no more): read again at the next move
                }
                state.version += head - (state.heads[id] ?? 0)
                state.heads[id] = head
            }
            state.loaded = true
            return taken
        }
    }
}
