import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A request to erase an install (docs/OPERATIONS.md, "Erasure of an install"), as `GET /v1/apps/{app}/erasures/{id}`
/// shows it: no install id, only its SHA-256.
public struct Erasure: Sendable, Equatable {
    public enum Status: String, Sendable { case pending, done }

    public let appId: AppID
    public let id: UUID
    /// SHA-256 of the install id as lower-case text with hyphens, in hex.
    public let installSHA256: String
    public let requestedAt: Date
    /// When the log stopped holding the install's events, and how many it held.
    public let erasedAt: Date?
    public let events: Int?
    public let doneAt: Date?

    public var status: Status { doneAt == nil ? .pending : .done }
}

/// The store's side of erasure: requests (`erasures`), the one scan of the log that finds a batch's
/// events, their move out of the log (into `erasure_events`, with their ids out of `event_ids`), and
/// the end of a request once every projection generation took the installs out of its figures
/// (``ProjectionLeader/forget(_:from:)``). The server's `ErasureWorker` decides when.
public struct ErasureStore: Sendable {
    /// An open request the worker takes on.
    public struct Request: Sendable, Equatable {
        public let appId: AppID
        public let id: UUID
        public let installId: UUID
    }

    /// One event of the log that an erasure removes: where it is, and which request it belongs to.
    public struct Found: Sendable, Equatable {
        public let appId: AppID
        public let erasure: UUID
        public let eventId: UUID
        public let occurredAt: Date
        public let position: FeedPosition
        /// Whether adoption counted it: not when its day had closed before the feed reached it (the
        /// fold's horizon follows the largest `recorded_at` of the app's events read).
        public var adoptionCounted = true
    }

    let pool: DatabasePool
    let logger: Logger

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    static let columns: SQL = """
        app_id, id, encode(install_sha256, 'hex'), requested_at, erased_at, events, done_at
        """

    /// Records a request to erase `install` of `app`, or answers the open one for it (a repeat changes
    /// nothing).
    public func request(app: AppID, install: UUID, at now: Date) async throws -> Erasure {
        let rows = try await pool.query(
            """
            WITH new AS (
                INSERT INTO erasures (app_id, id, install_id, install_sha256, requested_at)
                VALUES (\(app), \(UUID()), \(install), sha256(convert_to(lower(\(install)::uuid::text), 'UTF8')),
                        \(now.forPostgres))
                ON CONFLICT (app_id, install_id) WHERE done_at IS NULL DO NOTHING
                RETURNING \(Self.columns)
            )
            SELECT * FROM new
            UNION ALL
            SELECT \(Self.columns) FROM erasures
            WHERE app_id = \(app) AND install_id = \(install) AND done_at IS NULL AND NOT EXISTS (SELECT 1 FROM new)
            """, logger: logger)
        guard let erasure = try await Self.decode(rows).first else {
            // The open request was done between the insert and the read: ask again.
            return try await request(app: app, install: install, at: now)
        }
        return erasure
    }

    /// The request `id` of `app`, nil when there is none.
    public func erasure(app: AppID, id: UUID) async throws -> Erasure? {
        try await Self.decode(
            pool.query("SELECT \(Self.columns) FROM erasures WHERE app_id = \(app) AND id = \(id)", logger: logger)
        ).first
    }

    private static func decode(_ rows: Rows) async throws -> [Erasure] {
        var found: [Erasure] = []
        for try await (app, id, sha, requested, erased, events, done)
            in rows.decode((AppID, UUID, String, Date, Date?, Int?, Date?).self)
        {
            found.append(
                Erasure(
                    appId: app, id: id, installSHA256: sha, requestedAt: requested, erasedAt: erased, events: events,
                    doneAt: done))
        }
        return found
    }

    /// Whether any request is open (one small index read: what a pass with nothing to do costs).
    public func anyOpen() async throws -> Bool {
        for try await _ in try await pool.query("SELECT 1 FROM erasures WHERE done_at IS NULL LIMIT 1", logger: logger).decode(Int.self) {
            return true
        }
        return false
    }

    /// Open requests whose install's events the log still holds, oldest first.
    public func toErase(limit: Int) async throws -> [Request] {
        var requests: [Request] = []
        for try await (app, id, install) in try await pool.query(
            """
            SELECT app_id, id, install_id FROM erasures
            WHERE done_at IS NULL AND erased_at IS NULL AND install_id IS NOT NULL
            ORDER BY requested_at LIMIT \(limit)
            """, logger: logger
        ).decode((AppID, UUID, UUID).self) {
            requests.append(Request(appId: app, id: id, installId: install))
        }
        return requests
    }

    /// The cut (the oldest transaction still running: every transaction below it has ended, so the scan
    /// that follows sees all of them) and the events of `requests`' installs in transactions below it:
    /// one scan of the log for the whole batch. Their events in later transactions are new data.
    public func scan(_ requests: [Request]) async throws -> (cut: UInt64, found: [Found]) {
        var cut: UInt64 = 0
        for try await text in try await pool.query(
            "SELECT pg_snapshot_xmin(pg_current_snapshot())::text", logger: logger
        ).decode(String.self) {
            cut = UInt64(text) ?? 0
        }
        var found: [Found] = []
        for try await (app, erasure, event, occurred, tx, position) in try await pool.query(
            """
            SELECT e.app_id, k.id, e.event_id, e.occurred_at, e.tx_id::text, e.position
            FROM event_log e
            JOIN unnest(\(requests.map(\.appId))::text[], \(requests.map(\.installId))::uuid[], \(requests.map(\.id))::uuid[])
                 AS k(app_id, install_id, id)
              ON e.app_id = k.app_id AND e.install_id = k.install_id
            WHERE e.tx_id < \(String(cut))::text::xid8
            """, logger: logger
        ).decode((AppID, UUID, UUID, Date, String, Int64).self) {
            found.append(
                Found(
                    appId: app, erasure: erasure, eventId: event, occurredAt: occurred,
                    position: FeedPosition(transaction: UInt64(tx) ?? 0, position: position)))
        }
        try await markUncounted(&found)
        return (cut, found)
    }

    /// Marks the events adoption did not count: those of a day d read after the first of the app's events
    /// recorded on day d + 32 or later (the fold's closed days, as the backfill finds them). It reads the
    /// log only when an event is old enough for that.
    private func markUncounted(_ found: inout [Found]) async throws {
        let closable = AdoptionFold.openDays + 1
        guard let oldest = found.map({ UTCDay($0.occurredAt) }).min() else { return }
        let apps = Array(Set(found.map(\.appId)))
        var firsts: [AppID: [(day: UTCDay, position: FeedPosition)]] = [:]
        for try await (app, day, first) in try await pool.query(
            """
            SELECT app_id, (recorded_at AT TIME ZONE 'UTC')::date::text, min(ARRAY[tx_id::text::int8, position])
            FROM event_log WHERE app_id = ANY(\(apps)::text[]) AND recorded_at >= \(oldest.adding(days: closable).start)
            GROUP BY 1, 2
            """, logger: logger
        ).decode((AppID, String, [Int64]).self) {
            guard let day = UTCDay(day), first.count == 2 else { continue }
            firsts[app, default: []].append((day, FeedPosition(transaction: UInt64(first[0]), position: first[1])))
        }
        for index in found.indices {
            let closedFrom = UTCDay(found[index].occurredAt).adding(days: closable)
            let closing = firsts[found[index].appId]?.filter { $0.day >= closedFrom }.map(\.position).min()
            if let closing, closing <= found[index].position { found[index].adoptionCounted = false }
        }
    }

    /// The projection generations (active or building) that have not applied the log up to `position`,
    /// and the projections without an active generation yet.
    public func generationsBehind(_ position: FeedPosition, projections: [String]) async throws -> [String] {
        try await ProjectionStore.generationsBehind(
            "(p.last_tx, p.last_pos) < (\(String(position.transaction))::text::xid8, \(position.position))",
            projections: projections, on: pool, logger: logger)
    }

    /// Moves `found` out of the log in one transaction: into `erasure_events`, and their ids out of
    /// `event_ids` (a resend is new data). Returns how many rows left the log.
    @discardableResult
    public func move(_ found: [Found]) async throws -> Int {
        guard !found.isEmpty else { return 0 }
        return try await pool.transaction(logger: logger) { [logger] connection in
            var moved = 0
            for try await count in try await connection.query(
                """
                WITH k AS (
                    SELECT * FROM unnest(\(found.map(\.appId))::text[], \(found.map(\.erasure))::uuid[],
                                         \(found.map(\.eventId))::uuid[], \(found.map(\.occurredAt.forPostgres))::timestamptz[],
                                         \(found.map(\.adoptionCounted))::boolean[])
                         AS k(app_id, erasure_id, event_id, occurred_at, counted)
                ), gone AS (
                    DELETE FROM event_log e USING k
                    WHERE e.event_id = k.event_id AND e.occurred_at = k.occurred_at AND e.app_id = k.app_id
                    RETURNING k.erasure_id, k.counted, e.*
                ), kept AS (
                    INSERT INTO erasure_events
                        (app_id, erasure_id, tx_id, position, event_id, occurred_at, recorded_at, type, install_id,
                         platform, app_version, data, adoption_counted)
                    SELECT app_id, erasure_id, tx_id, position, event_id, occurred_at, recorded_at, type, install_id,
                           platform, app_version, data, counted
                    FROM gone
                    ON CONFLICT DO NOTHING
                ), ids AS (
                    DELETE FROM event_ids i USING gone g WHERE i.app_id = g.app_id AND i.event_id = g.event_id
                )
                SELECT count(*)::int8 FROM gone
                """, logger: logger
            ).decode(Int.self) {
                moved = count
            }
            return moved
        }
    }

    /// Marks `requests` erased from the log (below `cut`), each with an `install_forgotten` event that
    /// holds only the request's id, at `now` by the application's clock.
    public func markErased(_ requests: [Request], cut: UInt64, at now: Date) async throws {
        guard !requests.isEmpty else { return }
        try await pool.transaction(logger: logger) { [logger] connection in
            try await connection.query(
                """
                WITH marked AS (
                    UPDATE erasures r SET cut_tx = \(String(cut))::text::xid8, erased_at = now(),
                        events = (SELECT count(*) FROM erasure_events x WHERE x.app_id = r.app_id AND x.erasure_id = r.id)
                    FROM unnest(\(requests.map(\.appId))::text[], \(requests.map(\.id))::uuid[]) AS k(app_id, id)
                    WHERE r.app_id = k.app_id AND r.id = k.id AND r.erased_at IS NULL
                    RETURNING r.app_id, r.id
                )
                INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, data)
                SELECT gen_random_uuid(), \(now.forPostgres), \(now.forPostgres), app_id,
                       \(ServerEventType.installForgotten.rawValue), jsonb_build_object('erasure', id)
                FROM marked
                """, logger: logger)
        }
    }

    /// Ends the erased requests that every projection generation (active or building) created before
    /// the log stopped holding their events has corrected: their kept events and the record of the
    /// corrections go, and of the install only the SHA-256 stays. Returns how many ended.
    @discardableResult
    public func finish() async throws -> Int {
        var ended = 0
        for try await count in try await pool.query(
            """
            WITH ready AS (
                SELECT r.app_id, r.id FROM erasures r
                WHERE r.done_at IS NULL AND r.erased_at IS NOT NULL
                  AND NOT EXISTS (
                      SELECT 1 FROM projections p
                      WHERE p.state IN ('active', 'building') AND p.created_at <= r.erased_at
                        AND NOT EXISTS (
                            SELECT 1 FROM erasure_corrections c
                            WHERE c.app_id = r.app_id AND c.erasure_id = r.id AND c.name = p.name
                              AND c.generation = p.generation))
            ), kept AS (
                DELETE FROM erasure_events x USING ready WHERE x.app_id = ready.app_id AND x.erasure_id = ready.id
            ), corrected AS (
                DELETE FROM erasure_corrections c USING ready WHERE c.app_id = ready.app_id AND c.erasure_id = ready.id
            ), done AS (
                UPDATE erasures r SET install_id = NULL, done_at = now()
                FROM ready WHERE r.app_id = ready.app_id AND r.id = ready.id
                RETURNING 1
            )
            SELECT count(*)::int8 FROM done
            """, logger: logger
        ).decode(Int.self) {
            ended = count
        }
        return ended
    }
}
