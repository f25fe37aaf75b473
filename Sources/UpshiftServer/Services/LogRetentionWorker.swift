import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Retention of the event log (docs/OPERATIONS.md, "Retention"): at start and then every
/// ``RetentionSettings/interval``, one instance (an advisory lock) takes each month that has expired by the
/// application's clock (``UpshiftStore/LogMonth/isExpired(keeping:at:)``), oldest first, and
///
/// 1. waits while a projection generation (active or building) has not applied all of its events, or a
///    projection has no active generation yet;
/// 2. writes its archive into the export folder (``LogArchive``, which checks the rows against the month's);
/// 3. records what the log no longer holds, detaches the table without blocking ingestion and drops it.
///
/// A month that cannot go (a projection behind, an export that failed) stops the pass there: later
/// months wait too, so that the log always holds every event from one instant on. After the pass,
/// `event_ids` loses the ids of the events that are gone.
struct LogRetentionWorker: Service {
    let settings: RetentionSettings
    let retention: LogRetention
    let exporter: EventExporter
    let database: DatabaseSettings
    let clock: any WallClock
    let metrics: any MetricsFactory
    let logger: Logger

    /// What a pass did with one month (`upshift_retention_months_total{outcome}`).
    enum Outcome: String {
        case dropped, waiting, exportFailed = "export_failed", failed
    }

    func run() async throws {
        await LockedJob(name: "retention", database: database, logger: logger).run(every: settings.interval) { _ in
            try await pass()
        }
    }

    /// One pass at the clock's now: returns what happened to each expired month it looked at.
    @discardableResult
    func pass() async throws -> [(LogMonth, Outcome)] {
        let now = clock.now()
        var done: [(LogMonth, Outcome)] = []
        for partition in try await retention.partitions() where partition.month.isExpired(keeping: settings.months, at: now) {
            let outcome = await expire(partition, now: now)
            Counter(label: "upshift_retention_months_total", dimensions: [("outcome", outcome.rawValue)], factory: metrics).increment()
            done.append((partition.month, outcome))
            guard outcome == .dropped else { break }
        }
        if let horizon = try await retention.horizon() {
            let pruned = try await retention.pruneEventIDs(before: horizon.keptFrom, batch: settings.pruneBatch)
            if pruned > 0 { logger.info("event ids pruned with their months", metadata: ["ids": "\(pruned)"]) }
        }
        return done
    }

    private func expire(_ partition: LogRetention.Partition, now: Date) async -> Outcome {
        let month = partition.month
        var metadata: Logger.Metadata = ["month": "\(month)"]
        do {
            // A table detached earlier was archived and checked before it was: only the drop is left.
            if partition.attached && !partition.detachPending {
                let behind = try await retention.generationsBehind(partition, projections: Projections.all.map(\.name))
                guard behind.isEmpty else {
                    metadata["projections"] = "\(behind.joined(separator: ", "))"
                    logger.notice("retention waits for projections that have not applied the month", metadata: metadata)
                    return .waiting
                }
                // The archive is checked against the month's count of rows before it keeps its name.
                let written: LogArchive.Written
                do {
                    written = try await LogArchive.write(month, into: settings.directory, exporter: exporter, now: now)
                } catch {
                    metadata["folder"] = "\(settings.directory.path)"
                    metadata["error"] = "\(String(reflecting: error))"
                    logger.error("retention could not archive the month; it stays", metadata: metadata)
                    return .exportFailed
                }
                metadata["rows"] = "\(written.rows)"
                metadata["file"] = "\(written.file.path)"
                metadata["sha256"] = "\(written.sha256)"
                try await retention.recordDropping(partition)
            }
            try await retention.detachAndDrop(partition)
            logger.notice("retention dropped the month from the log", metadata: metadata)
            return .dropped
        } catch {
            metadata["error"] = "\(String(reflecting: error))"
            logger.error("retention could not drop the month; retrying next pass", metadata: metadata)
            return .failed
        }
    }
}
