import Synchronization

/// The one bound on a graceful shutdown (`UPSHIFT_SHUTDOWN_TIMEOUT`), shared by the parts that stop.
///
/// From the moment shutdown begins, requests in flight may run until ``requestsEnd``, when their
/// connections are closed; the ingestion writer writes what is pending until ``end`` and then gives
/// up on the rest (observations counted as dropped), so that SIGTERM ends within the timeout whether
/// or not the database answers. Whichever part learns first that shutdown began starts the clock.
final class ShutdownDeadline: Sendable {
    let timeout: Duration
    /// The last part of the timeout, kept for the writer after requests are cut off: a fifth of it,
    /// at most one flush timeout.
    let writerReserve: Duration
    private let started = Mutex<ContinuousClock.Instant?>(nil)

    init(timeout: Duration, flushTimeout: Duration) {
        self.timeout = timeout
        writerReserve = min(timeout / 5, flushTimeout)
    }

    /// Marks the start of the shutdown (the first call counts) and returns it.
    @discardableResult
    func begin() -> ContinuousClock.Instant {
        started.withLock { started in
            if let started { return started }
            let now = ContinuousClock.now
            started = now
            return now
        }
    }

    /// When the whole shutdown must be over; nil while it has not begun.
    var end: ContinuousClock.Instant? {
        started.withLock { $0 }.map { $0.advanced(by: timeout) }
    }

    /// When requests still running are cut off; nil while shutdown has not begun.
    var requestsEnd: ContinuousClock.Instant? {
        end.map { $0.advanced(by: .zero - writerReserve) }
    }
}
