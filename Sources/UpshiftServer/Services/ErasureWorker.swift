import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Erasure of installs (docs/OPERATIONS.md, "Erasure of an install"): every ``ProjectionSettings/erasurePass``, one
/// instance (an advisory lock) takes the open requests as one batch and
///
/// 1. finds their events with one scan of the log, below a cut (the oldest transaction still running:
///    their events in later transactions are new data);
/// 2. waits until every projection generation has applied those events, so that each takes out exactly
///    what it counted;
/// 3. moves them out of the log (and their ids out of `event_ids`) in transactions sized to a fifth of
///    the projections' transaction-id bound, rewrites the archives of retention that hold them
///    (``LogArchive/forget(_:in:)``), and marks each request erased with an `install_forgotten` event.
///
/// Each projection's runner then takes the installs out of its figures between its batches
/// (``ProjectionLeader/forget(_:from:)``), and a later pass ends the requests every generation corrected.
struct ErasureWorker: Service {
    let store: ErasureStore
    let settings: ProjectionSettings
    let database: DatabaseSettings
    let readiness: Readiness
    /// Where the archives of closed months are (`UPSHIFT_EXPORT_DIR`, retention's or `log export --month`'s):
    /// those that hold an erased install are rewritten without it.
    let archives: URL?
    let clock: any WallClock
    let metrics: any MetricsFactory
    let logger: Logger
    /// Requests per batch: one scan of the log serves them all.
    var batch = 1_000

    func run() async throws {
        await cancelWhenGracefulShutdown { await readiness.reached(.migrations) }
        await LockedJob(name: "erasure", database: database, logger: logger).run(
            every: settings.erasurePass, due: { try await store.anyOpen() }
        ) { _ in try await pass() }
    }

    /// One pass: ends the requests every generation corrected, then erases the open ones from the log.
    /// Returns how many requests it erased from the log.
    @discardableResult
    func pass() async throws -> Int {
        let ended = try await store.finish()
        if ended > 0 {
            Counter(label: "upshift_erasures_total", dimensions: [("state", "done")], factory: metrics).increment(by: ended)
            logger.notice("erasures done", metadata: ["erasures": "\(ended)"])
        }
        let requests = try await store.toErase(limit: batch)
        guard !requests.isEmpty else { return 0 }
        let (cut, found) = try await store.scan(requests)
        if let last = found.map(\.position).max() {
            let waited = ContinuousClock.now
            while true {
                let behind = try await store.generationsBehind(last, projections: Projections.all.map(\.name))
                if behind.isEmpty { break }
                guard ContinuousClock.now - waited < settings.erasurePass else {
                    logger.notice(
                        "erasure waits for projections that have not applied the installs' events",
                        metadata: ["projections": "\(behind.joined(separator: ", "))", "erasures": "\(requests.count)"])
                    return 0
                }
                try await Task.sleep(for: .seconds(1))
            }
        }
        var sizer = WriteSizer(maximum: 10_000)
        var rest = found[...]
        while !rest.isEmpty {
            let part = Array(rest.prefix(sizer.rows))
            let began = ContinuousClock.now
            try await store.move(part)
            sizer.record(rows: part.count, took: ContinuousClock.now - began, target: settings.xidTarget(rebuilding: false))
            rest = rest.dropFirst(part.count)
        }
        if let archives {
            for written in try await LogArchive.forget(requests.map { ($0.appId, $0.installId) }, in: archives) {
                logger.notice(
                    "archive rewritten without erased installs",
                    metadata: ["file": "\(written.file.path)", "rows": "\(written.rows)", "sha256": "\(written.sha256)"])
            }
        }
        try await store.markErased(requests, cut: cut, at: clock.now())
        Counter(label: "upshift_erasures_total", dimensions: [("state", "erased")], factory: metrics).increment(by: requests.count)
        logger.notice("installs erased from the log", metadata: ["erasures": "\(requests.count)", "events": "\(found.count)"])
        return requests.count
    }
}
