import Foundation
import Testing
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// How long a batch holds a transaction id, bounded at 1.5 s for a bound of 1 s: a batch sized to a fifth of
/// the bound takes several times longer on two cores shared with other suites, so this one runs alone.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct ProjectionXidHoldTests {
    /// A backlog far larger than a batch's time allows, applied in ordinary batches (no set-based catch-up)
    /// whose maximum is the whole backlog: each batch is sized by time, and no session of the server holds
    /// a transaction id longer than `UPSHIFT_PROJECTION_MAX_XID_SECONDS` (1 s here) and half a second,
    /// sampled from `pg_stat_activity` every 100 ms.
    @Test func noBatchHoldsATransactionIdLongerThanTheBound() async throws {
        let harness = try await Harness.make()
        let events = sampleFleet(now: harness.clock.now(), installs: 6_000)
        try await postFleet(events, harness: harness, roles: [.http])
        var configuration = harness.configuration()
        configuration.roles = [.projections]
        configuration.projections.backfillThreshold = nil
        configuration.projections.batchSize = 1_000_000
        configuration.projections.maximumXidHold = .seconds(1)
        let bound = Duration.milliseconds(1_500)
        let holds = try await harness.run(configuration) { (_: Server) async throws -> [String: Duration] in
            var firstSeen: [String: ContinuousClock.Instant] = [:]
            var held: [String: Duration] = [:]
            var statements: [String: String] = [:]
            let started = ContinuousClock.now
            while try await harness.appliedEvents() < events.count * Projections.all.count {
                guard ContinuousClock.now - started < .seconds(300) else { throw HarnessError("not caught up within 300 s") }
                let now = ContinuousClock.now
                let rows = try await harness.sql { client in
                    var seen: [String] = []
                    for try await (pid, xid, app, query) in try await client.query(
                        """
                        SELECT pid, backend_xid::text, application_name, left(query, 80) FROM pg_stat_activity
                        WHERE backend_xid IS NOT NULL AND datname = current_database() AND application_name LIKE 'upshift%'
                        """
                    ).decode((Int32, String, String, String).self) { seen.append("\(pid):\(xid) \(app): \(query)") }
                    return seen
                }
                for row in rows {
                    // Timed by session and transaction id; named by the statement last seen holding it.
                    let key = String(row.prefix { $0 != " " })
                    let first = firstSeen[key] ?? now
                    firstSeen[key] = first
                    held[key] = now - first
                    statements[key] = row
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            return held.reduce(into: [:]) { named, hold in named[statements[hold.key] ?? hold.key] = hold.value }
        }
        let longest = holds.values.max() ?? .zero
        let holder = holds.first { $0.value == longest }?.key ?? "-"
        print("ProjectionXidHoldTests: \(events.count) events in batches by time; \(holds.count) transaction ids sampled, the longest seen for \(longest)")
        #expect(holds.count > 10, "too few transactions sampled to judge: \(holds.count)")
        #expect(longest <= bound, "a transaction id was held for \(longest), last seen in \(holder)")
        try await harness.expectAdoptionMatchesTheLog()
    }
}
