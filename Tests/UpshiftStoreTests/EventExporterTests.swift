import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// The export's bound on what one answer reads (docs/OPERATIONS.md, "Export for a warehouse"): an app whose
/// events are sparse among another's gets them all, once, over ranges that each reach at most `scanLimit`
/// events of the log, every range but the last saying it is not complete.
@Suite struct EventExporterTests {
    @Test func aSparseAppsEventsComeOverRangesThatEachScanAtMostTheirLimit() async throws {
        let database = try await TestDatabases.shared.fresh()
        let now = Date()
        try await withPostgres(database) { client in
            try await EventLog(client: client, logger: TestEnvironment.logger).ensurePartitions(now: now)
            // 33 events of transactions 90 to 122 (long ended: below every horizon), across the step from two
            // digits to three, where text order is not the feed's: every eleventh of app `sparse`, the rest of
            // app `busy`.
            var sparse: Set<String> = []
            for index in 0..<33 {
                let id = UUID()
                let app = index % 11 == 5 ? "sparse" : "busy"
                if app == "sparse" { sparse.insert(id.uuidString.lowercased()) }
                try await client.query(
                    """
                    INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, tx_id)
                    VALUES (\(id), \(now), \(now), \(app), 'launched', \(UUID()), 'ios', '1.0', \(String(90 + index))::text::xid8)
                    """, logger: TestEnvironment.logger)
            }
            let exporter = EventExporter(
                pool: DatabasePool(client: client, logger: TestEnvironment.logger), logger: TestEnvironment.logger,
                pageSize: 2, scanLimit: 7)
            var cursor = FeedPosition.start
            var exported: [String] = []
            var ranges = 0
            // The horizon is the cluster's: other suites' transactions may hold it back for a while.
            let deadline = ContinuousClock.now + .seconds(60)
            while ContinuousClock.now < deadline {
                let range = try await exporter.range(app: "sparse", after: cursor, limit: 100)
                let scanned = try await Self.count(
                    client,
                    "SELECT count(*)::int8 FROM event_log WHERE (tx_id, position) > ('\(cursor.transaction)'::xid8, \(cursor.position)) AND (tx_id, position) <= ('\(range.through.transaction)'::xid8, \(range.through.position))"
                )
                #expect(scanned <= 7, "a range after \(cursor) reached \(scanned) events of the log, to \(range.through)")
                try await exporter.write(range, as: .ndjson) { page in
                    for line in page.split(separator: "\n") {
                        if case .string(let id)? = try JSONValue.parse(Data(line.utf8))["event_id"] { exported.append(id) }
                    }
                }
                ranges += 1
                cursor = range.through
                if range.complete, exported.count >= sparse.count { break }
                if range.complete { try await Task.sleep(for: .milliseconds(200)) }
            }
            #expect(exported.count == sparse.count && Set(exported) == sparse)
            #expect(ranges >= 5, "33 events of the log, at most 7 a range")
        }
    }

    static func count(_ client: PostgresClient, _ text: String) async throws -> Int {
        for try await value in try await client.query(PostgresQuery(unsafeSQL: text), logger: TestEnvironment.logger).decode(Int.self) {
            return value
        }
        return -1
    }
}
