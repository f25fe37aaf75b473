import Synchronization

/// A warning that an outage can raise thousands of times a second (a check observation dropped per check):
/// the first is logged, then at most one line per `interval`, saying how many came since the line before.
/// The exact count is the metric's.
final class LogThrottle: Sendable {
    let interval: Duration
    private let state = Mutex<(since: Int, last: ContinuousClock.Instant?)>((0, nil))

    init(interval: Duration = .seconds(10)) {
        self.interval = interval
    }

    /// Counts one occurrence; calls `log` with the occurrences since the last line (this one included)
    /// when a line is due.
    func occurred(_ log: (_ count: Int) -> Void) {
        let now = ContinuousClock.now
        let due: Int? = state.withLock { state in
            state.since += 1
            if let last = state.last, now - last < interval { return nil }
            defer { state = (0, now) }
            return state.since
        }
        if let due { log(due) }
    }
}
