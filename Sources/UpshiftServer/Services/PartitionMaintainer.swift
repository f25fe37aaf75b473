import Logging
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Keeps the event log's monthly partitions ahead of the clock: once at start (before the server takes
/// events) and then every day (docs/ARCHITECTURE.md, "Partitions by month").
struct PartitionMaintainer: Service {
    let log: EventLog
    let clock: any WallClock
    let logger: Logger
    var interval: Duration = .seconds(86_400)
    var retryInterval: Duration = .seconds(60)

    /// Creates the partitions the current clock needs; called before the server starts.
    func ensure() async throws {
        let created = try await log.ensurePartitions(now: clock.now())
        if created > 0 { logger.info("created event log partitions", metadata: ["partitions.created": "\(created)"]) }
    }

    func run() async throws {
        var delay = interval
        while !Task.isCancelledOrShuttingDown {
            let wait = delay
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: wait) }
            } catch {
                return
            }
            do {
                try await ensure()
                delay = interval
            } catch {
                logger.error("partition upkeep failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                delay = retryInterval
            }
        }
    }
}

extension Task where Success == Never, Failure == Never {
    static var isCancelledOrShuttingDown: Bool { isCancelled || isShuttingDownGracefully }
}
