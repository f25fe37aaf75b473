import Foundation
import UpshiftStore

/// Whether PostgreSQL answers, as `/health/db` reports it: from a result at most a second old, so that
/// however often the endpoint is asked, the database is asked at most about once a second (callers
/// that arrive while a probe runs share it).
final class DatabaseProbe: @unchecked Sendable {
    enum Result: Sendable {
        case reachable(latency: Duration)
        case unreachable
    }

    let pool: DatabasePool
    let maximumAge: Duration
    /// How long one probe may take before it counts as unreachable.
    let limit: Duration
    private let lock = NSLock()
    private var last: (result: Result, at: ContinuousClock.Instant)?
    private var running: Task<Result, Never>?

    init(pool: DatabasePool, maximumAge: Duration = .seconds(1), limit: Duration = .seconds(1)) {
        self.pool = pool
        self.maximumAge = maximumAge
        self.limit = limit
    }

    func current() async -> Result {
        let (cached, probe) = lock.withLock { () -> (Result?, Task<Result, Never>?) in
            if let last, ContinuousClock.now - last.at <= maximumAge { return (last.result, nil) }
            if running == nil {
                let (pool, limit) = (pool, limit)
                running = Task { await Self.probe(pool, within: limit) }
            }
            return (nil, running)
        }
        if let cached { return cached }
        guard let probe else { return .unreachable }
        let result = await probe.value
        lock.withLock {
            if running == probe {
                last = (result, .now)
                running = nil
            }
        }
        return result
    }

    private static func probe(_ pool: DatabasePool, within limit: Duration) async -> Result {
        let started = ContinuousClock.now
        do {
            _ = try await withDeadline(limit) { try await pool.query("SELECT 1", logger: pool.logger) }
            return .reachable(latency: ContinuousClock.now - started)
        } catch {
            return .unreachable
        }
    }
}
