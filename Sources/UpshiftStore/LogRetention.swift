import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The log's side of retention (docs/OPERATIONS.md, "Retention"): its monthly partitions, whether the
/// projections have passed one, detaching and dropping it, what the log no longer holds (`log_retention`),
/// and pruning `event_ids` with it. The worker that decides when is the server's `LogRetentionWorker`.
public struct LogRetention: Sendable {
    /// What the log no longer holds.
    public struct Horizon: Sendable, Equatable {
        /// Every event that occurred before this instant is gone.
        public let keptFrom: Date
        /// The last position of the feed that a dropped event had: a cursor before it would skip events
        /// that are gone.
        public let droppedThrough: FeedPosition
    }

    /// One month's table of the log.
    public struct Partition: Sendable, Equatable {
        public let month: LogMonth
        /// Part of `event_log` (false: detached, and dropped next).
        public let attached: Bool
        /// A `DETACH … CONCURRENTLY` that did not finish (the connection closed): it is finalized next.
        public let detachPending: Bool

        public var table: SQLIdentifier { Self.table(month) }

        /// `event_log_y2026m09`, as `upshift_ensure_event_partitions` names it.
        static func table(_ month: LogMonth) -> SQLIdentifier {
            SQLIdentifier(String(format: "event_log_y%04dm%02d", month.year, month.month))
        }
    }

    let pool: DatabasePool
    let logger: Logger

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    public func horizon() async throws -> Horizon? {
        let rows = try await pool.query("SELECT kept_from, dropped_tx::text, dropped_pos FROM log_retention", logger: logger)
        for try await (keptFrom, transaction, position) in rows.decode((Date, String, Int64).self) {
            return Horizon(keptFrom: keptFrom, droppedThrough: FeedPosition(transaction: UInt64(transaction) ?? 0, position: position))
        }
        return nil
    }

    /// Refuses to export after `cursor` when events after it were dropped (the export would skip them
    /// without a word): a ``FieldError`` of kind `gone` naming `field` and the oldest cursor that resumes
    /// whole. The start (`0:0`) always resumes: from the oldest event kept.
    public func requireWhole(after cursor: FeedPosition, field: String) async throws {
        guard cursor != .start, let horizon = try await horizon(), cursor < horizon.droppedThrough else { return }
        throw FieldError(
            field,
            """
            events after \(cursor.cursor) were dropped by retention (every event before \(Timestamp.format(horizon.keptFrom)); \
            their months are in the archives): the oldest cursor that resumes whole is \(horizon.droppedThrough.cursor), \
            and 0:0 starts at the oldest event kept
            """, kind: .gone)
    }

    /// Every month's table of the log, attached or not, oldest first.
    public func partitions() async throws -> [Partition] {
        let rows = try await pool.query(
            """
            SELECT c.relname::text, i.inhrelid IS NOT NULL, coalesce(i.inhdetachpending, false)
            FROM pg_class c
            LEFT JOIN pg_inherits i ON i.inhrelid = c.oid AND i.inhparent = 'event_log'::regclass
            WHERE c.relkind = 'r' AND c.relnamespace = current_schema()::regnamespace
              AND c.relname ~ '^event_log_y[0-9]{4}m[0-9]{2}$'
            ORDER BY c.relname
            """, logger: logger)
        var result: [Partition] = []
        for try await (name, attached, pending) in rows.decode((String, Bool, Bool).self) {
            let digits = name.dropFirst("event_log_y".count)
            guard let month = LogMonth("\(digits.prefix(4))-\(digits.suffix(2))") else { continue }
            result.append(Partition(month: month, attached: attached, detachPending: pending))
        }
        return result
    }

    /// The projection generations (`name:generation`, active or building) that have not applied every
    /// event of `partition` yet, and each of `projections` that has no active generation at all (a first
    /// start has not created it yet: it will read the whole log): while there is one, the month stays.
    public func generationsBehind(_ partition: Partition, projections: [String]) async throws -> [String] {
        try await ProjectionStore.generationsBehind(
            "EXISTS (SELECT 1 FROM \(partition.table) e WHERE (e.tx_id, e.position) > (p.last_tx, p.last_pos))",
            projections: projections, on: pool, logger: logger)
    }

    /// Records that `partition` is going (before it is detached): the log keeps events from the month's
    /// end, and no export may resume before its last position. The month's catalog events are kept
    /// (`catalog_events_kept`, which the view `catalog_events` reads) in the same transaction.
    public func recordDropping(_ partition: Partition) async throws {
        try await pool.transaction(logger: logger) { [logger] connection in
            try await connection.query(
                """
                INSERT INTO catalog_events_kept
                    (event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data, tx_id, position)
                SELECT event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data, tx_id, position
                FROM \(partition.table) WHERE stream_id IS NOT NULL
                ON CONFLICT DO NOTHING
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO log_retention AS r (kept_from, dropped_tx, dropped_pos)
                SELECT \(partition.month.end), coalesce(e.tx_id, '0'::xid8), coalesce(e.position, 0)
                FROM (SELECT) AS one LEFT JOIN (
                    SELECT tx_id, position FROM \(partition.table) ORDER BY tx_id DESC, position DESC LIMIT 1
                ) AS e ON true
                ON CONFLICT (only_row) DO UPDATE SET
                    kept_from = greatest(r.kept_from, EXCLUDED.kept_from),
                    dropped_tx = CASE WHEN (EXCLUDED.dropped_tx, EXCLUDED.dropped_pos) > (r.dropped_tx, r.dropped_pos)
                                      THEN EXCLUDED.dropped_tx ELSE r.dropped_tx END,
                    dropped_pos = CASE WHEN (EXCLUDED.dropped_tx, EXCLUDED.dropped_pos) > (r.dropped_tx, r.dropped_pos)
                                       THEN EXCLUDED.dropped_pos ELSE r.dropped_pos END,
                    updated_at = now()
                """, logger: logger)
        }
    }

    /// Takes `partition` out of the log without blocking ingestion (`DETACH PARTITION … CONCURRENTLY`, which
    /// waits for the transactions that may still read it), finishing a detach that was cut short, then
    /// drops it.
    public func detachAndDrop(_ partition: Partition) async throws {
        if partition.attached {
            let how: SQL = partition.detachPending ? "FINALIZE" : "CONCURRENTLY"
            try await pool.query("ALTER TABLE event_log DETACH PARTITION \(partition.table) \(how)", logger: logger)
        }
        try await pool.query("DROP TABLE IF EXISTS \(partition.table)", logger: logger)
    }

    /// Deletes the ids of events that occurred before `before` from `event_ids`, `batch` rows of the table
    /// at a time in key order, each batch a short transaction of its own; returns how many it deleted.
    public func pruneEventIDs(before: Date, batch: Int = 10_000) async throws -> Int {
        var after: (app: String, id: UUID)?
        var deleted = 0
        while true {
            let from: SQL = after.map { "WHERE (app_id, event_id) > (\($0.app), \($0.id))" } ?? ""
            let rows = try await pool.query(
                """
                WITH walked AS (
                    SELECT app_id, event_id, occurred_at FROM event_ids \(from)
                    ORDER BY app_id, event_id LIMIT \(Int64(batch))
                ), gone AS (
                    DELETE FROM event_ids d USING walked w
                    WHERE d.app_id = w.app_id AND d.event_id = w.event_id AND w.occurred_at < \(before)
                    RETURNING 1
                )
                SELECT (SELECT app_id FROM walked ORDER BY app_id DESC, event_id DESC LIMIT 1),
                       (SELECT event_id FROM walked ORDER BY app_id DESC, event_id DESC LIMIT 1),
                       (SELECT count(*) FROM walked)::int8, (SELECT count(*) FROM gone)::int8
                """, logger: logger)
            var walked = 0
            for try await (app, id, seen, gone) in rows.decode((String?, UUID?, Int, Int).self) {
                walked = seen
                deleted += gone
                if let app, let id { after = (app, id) }
            }
            if walked < batch { return deleted }
        }
    }
}

extension LogMonth {
    /// Whether retention of `months` removes this month at `now`: its first day plus `months` + 1 months
    /// has passed, and no instant of it is younger than 31 days (so that no event of it can still arrive).
    public func isExpired(keeping months: Int, at now: Date) -> Bool {
        guard isClosed(at: now), let expiry = Calendar.utc.date(byAdding: .month, value: months + 1, to: start) else { return false }
        return expiry <= now
    }
}
