import Synchronization

/// What start-up has done (docs/OPERATIONS.md, "Running it in production", health): the migrations, the
/// partitions and, where HTTP is served, the first catalog snapshot and the keys. Marked once and never unset
/// by a database outage: checks keep working from memory, so an outage must not take instances out of a load
/// balancer. Services that need a step done wait for it with ``reached(_:)``.
final class Readiness: Sendable {
    enum Step: String, Sendable, CaseIterable {
        case migrations, partitions, catalog, keys
    }

    private struct State {
        var done: Set<Step> = []
        var waiters: [Int: (step: Step, continuation: CheckedContinuation<Void, Never>)] = [:]
        var nextWaiter = 0
    }

    private let state = Mutex(State())
    private let required: Set<Step>

    init(required: Set<Step>) {
        self.required = required
    }

    func mark(_ step: Step) {
        let woken = state.withLock { state in
            state.done.insert(step)
            let woken = state.waiters.filter { $0.value.step == step }
            for id in woken.keys { state.waiters[id] = nil }
            return woken.values.map(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// The required steps not done yet (`/health/ready` answers `503` while there are any).
    var missing: Set<Step> {
        state.withLock { required.subtracting($0.done) }
    }

    /// Returns once `step` is done, or when the task is cancelled.
    func reached(_ step: Step) async {
        let id = state.withLock { state in
            state.nextWaiter += 1
            return state.nextWaiter
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                let now = state.withLock { state -> Bool in
                    if state.done.contains(step) || Task.isCancelled { return true }
                    state.waiters[id] = (step, continuation)
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
            waiter?.continuation.resume()
        }
    }
}
