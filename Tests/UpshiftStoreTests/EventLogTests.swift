import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

func sampleEvent(occurredAt: Date, app: AppID = "expenses", type: EventType = .launched) -> Event {
    Event(
        id: UUID(), type: type, occurredAt: occurredAt, appId: app, installId: UUID(), platform: "ios",
        appVersion: "1.8.0", data: #"{"osVersion":"17.4"}"#)
}

@Suite struct EventLogTests {
    let now = Timestamp.parse("2026-11-21T10:00:00Z")!

    @Test func partitionsCoverTheMonthsAroundNowAndThereIsNoDefault() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let log = EventLog(client: client, logger: TestEnvironment.logger)
            try await log.ensurePartitions(now: now)
            #expect(try await log.ensurePartitions(now: now) == 0)  // idempotent
            let rows = try await client.query(
                """
                SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i
                JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = 'event_log'::regclass ORDER BY 1
                """)
            var names: [String] = []
            var bounds: [String] = []
            for try await (name, bound) in rows.decode((String, String).self) {
                names.append(name)
                bounds.append(bound)
            }
            // now − 31 days is in October, now + 2 months is in January.
            for month in ["event_log_y2026m10", "event_log_y2026m11", "event_log_y2026m12", "event_log_y2027m01"] {
                #expect(names.contains(month), "\(month) missing from \(names)")
            }
            #expect(!bounds.contains("DEFAULT"))
        }
    }

    @Test func appendStoresEachEventOnceAndReportsRetriesAsNotNew() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let log = EventLog(client: client, logger: TestEnvironment.logger)
            try await log.ensurePartitions(now: now)
            let events = (0..<50).map { sampleEvent(occurredAt: now.addingTimeInterval(Double(-$0) * 86_400 / 2)) }
            let first = try await log.append(events, recordedAt: now)
            #expect(first == Array(repeating: true, count: 50))
            let again = try await log.append(events, recordedAt: now)
            #expect(again == Array(repeating: false, count: 50))
            // Old and new events interleaved: each answer is that of the event at its position.
            let mixed = (0..<20).map { $0 % 3 == 0 ? events[$0] : sampleEvent(occurredAt: now.addingTimeInterval(Double(-$0))) }
            #expect(try await log.append(mixed, recordedAt: now) == (0..<20).map { $0 % 3 != 0 })
            let rows = try await client.query("SELECT count(*), count(DISTINCT event_id) FROM event_log")
            for try await (count, distinct) in rows.decode((Int, Int).self) {
                #expect(count == 63)
                #expect(distinct == 63)
            }
            let data = try await client.query("SELECT data->>'osVersion', recorded_at FROM event_log LIMIT 1")
            for try await (os, recorded) in data.decode((String, Date).self) {
                #expect(os == "17.4")
                #expect(abs(recorded.timeIntervalSince(now)) < 0.001)
            }
        }
    }

    @Test func anIdIsOneEventPerAppWhateverItsTime() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let log = EventLog(client: client, logger: TestEnvironment.logger)
            try await log.ensurePartitions(now: now)
            let first = sampleEvent(occurredAt: now)
            #expect(try await log.append([first], recordedAt: now) == [true])
            // The same id an hour earlier (another partition key): not stored, and the stored one is found.
            var moved = first
            moved.occurredAt = now.addingTimeInterval(-3_600)
            #expect(try await log.append([moved], recordedAt: now) == [false])
            let stored = try await log.storedEvents(matching: [moved])
            #expect(stored.map(\.occurredAt.microseconds) == [first.occurredAt.microseconds])
            #expect(moved.firstDifference(from: try #require(stored.first)) == "occurredAt")
            #expect(first.firstDifference(from: try #require(stored.first)) == nil)
            // The same id in another app is that app's own event.
            var elsewhere = first
            elsewhere.appId = "another-app"
            elsewhere.occurredAt = now.addingTimeInterval(-60)
            #expect(try await log.append([elsewhere], recordedAt: now) == [true])
            let rows = try await client.query("SELECT count(*)::int FROM event_log WHERE event_id = \(first.id)")
            for try await count in rows.decode(Int.self) { #expect(count == 2) }
        }
    }
}

/// Holds a write transaction open, which holds every feed of the cluster back (docs/ARCHITECTURE.md,
/// "The horizon is cluster-wide"): its tests run one at a time.
@Suite(.serialized) struct FeedReaderTests {
    let now = Date()

    @Test func aTransactionThatCommitsLateIsDeliveredAfterItCommitsAndNothingTwice() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database, maximumConnections: 4) { client in
            let log = EventLog(client: client, logger: TestEnvironment.logger)
            let feed = FeedReader(client: client, logger: TestEnvironment.logger)
            try await log.ensurePartitions(now: now)
            let early = sampleEvent(occurredAt: now)
            let late = sampleEvent(occurredAt: now)
            let (holding, release) = AsyncStream.makeStream(of: Void.self)
            let (inserted, insertedSignal) = AsyncStream.makeStream(of: Int64.self)
            async let slowTransaction: Void = client.withTransaction(logger: TestEnvironment.logger) { connection in
                // Takes the lower position, then stays open while another transaction commits.
                let rows = try await connection.query(
                    """
                    INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version)
                    VALUES (\(late.id), \(late.occurredAt), now(), 'expenses', 'launched', \(late.installId), 'ios', '1.0')
                    RETURNING position
                    """, logger: TestEnvironment.logger)
                for try await position in rows.decode(Int64.self) { insertedSignal.yield(position) }
                for await _ in holding { break }
            }
            var latePosition: Int64 = .max
            for await position in inserted {
                latePosition = position
                break
            }
            _ = try await log.append([early], recordedAt: now)
            let earlyPosition = try await client.query("SELECT position FROM event_log WHERE event_id = \(early.id)")
            for try await position in earlyPosition.decode(Int64.self) {
                #expect(latePosition < position)  // the late transaction holds the lower position
            }

            // While the slow transaction is open, neither event is handed out: the reader never
            // moves past a position that could still be filled in below it.
            #expect(try await feed.read(after: .start, limit: 100).isEmpty)

            release.yield()
            try await slowTransaction

            // Any write transaction open elsewhere in the cluster holds the horizon too (docs/ARCHITECTURE.md,
            // "The horizon is cluster-wide"): other suites run beside this one, so the wait is long, and a
            // wait that ends unmet names the transactions that held it.
            var delivered: [ProjectionEvent] = []
            var checkpoint = FeedPosition.start
            do {
                try await Waits.until("both events delivered", timeout: .seconds(120)) {
                    let batch = try await feed.read(after: checkpoint, limit: 1)
                    if let last = batch.last {
                        checkpoint = last.feedPosition
                        delivered += batch
                    }
                    return delivered.count == 2
                }
            } catch let error as Waits.TimedOut {
                Issue.record("\(error); transactions holding the horizon: \(try await Self.openTransactions(client))")
            }
            #expect(delivered.map(\.id) == [late.id, early.id])
            #expect(try await feed.read(after: checkpoint, limit: 100).isEmpty)
        }
    }

    /// The cluster's transactions that hold an xid or a snapshot, oldest first.
    static func openTransactions(_ client: PostgresClient) async throws -> [String] {
        let rows = try await client.query(
            """
            SELECT datname || ' ' || pid || ' ' || state || ' for ' || (now() - xact_start)::text || ': ' || left(query, 120)
            FROM pg_stat_activity
            WHERE (backend_xid IS NOT NULL OR backend_xmin IS NOT NULL) AND pid <> pg_backend_pid()
            ORDER BY xact_start
            """)
        var holders: [String] = []
        for try await line in rows.decode(String?.self) { holders.append(line ?? "?") }
        return holders
    }
}
