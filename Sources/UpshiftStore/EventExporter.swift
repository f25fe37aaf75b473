import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// Reads one app's events for a warehouse (docs/OPERATIONS.md, "Export for a warehouse"), as the
/// projections read the log (``FeedReader``): in (`tx_id`, `position`) order and only below the oldest
/// transaction still running, so that a cursor never passes an event that commits later. An export is a
/// ``Range`` fixed first, then written a page at a time: memory holds one page, and every statement is a
/// short one within the pool's bounds. The log has no index by app: with a `scanLimit`, a range reaches at
/// most that many events of the log (any app's) past its cursor, so that an app whose events are sparse
/// among others' still gets an answer within the statement timeout, and says whether it is ``Range/complete``.
public struct EventExporter: Sendable {
    /// The events of `app` after `after`, up to and including `through`: all committed, none to come.
    /// `through` is where the next export resumes.
    public struct Range: Sendable, Equatable {
        public let app: AppID
        public let after: FeedPosition
        public let through: FeedPosition
        /// Whether `through` is the horizon: every event that was final when the range was read lies in it
        /// or before it (otherwise the range stopped at its limit of rows or of events scanned).
        public let complete: Bool
    }

    let pool: DatabasePool
    let logger: Logger
    /// Events per statement.
    let pageSize: Int
    /// Events of the log (any app's) a range reaches past its cursor at most; nil: no bound.
    let scanLimit: Int?

    public init(pool: DatabasePool, logger: Logger, pageSize: Int = 1_000, scanLimit: Int? = nil) {
        self.pool = pool
        self.logger = logger
        self.pageSize = pageSize
        self.scanLimit = scanLimit
    }

    /// The range after `cursor`: at most `limit` events (nil: every final one). A cursor of a transaction
    /// that has not started yet was never given by an export: a ``FieldError`` naming `field` (`422`).
    public func range(app: AppID, after cursor: FeedPosition, limit: Int?, field: String = "since") async throws -> Range {
        let snapshot = try await pool.query(
            "SELECT pg_snapshot_xmin(s)::text, pg_snapshot_xmax(s)::text FROM pg_current_snapshot() AS s", logger: logger)
        var bounds: (xmin: UInt64, xmax: UInt64)?
        for try await (xmin, xmax) in snapshot.decode((String, String).self) { bounds = (UInt64(xmin) ?? 0, UInt64(xmax) ?? 0) }
        guard let bounds, bounds.xmin > 0 else { throw FieldError(field, "the database gave no snapshot") }
        guard cursor.transaction < bounds.xmax else {
            throw FieldError(field, "\(cursor.cursor) is ahead of the log: resume from a cursor an export gave", kind: .inconsistent)
        }
        // Everything of transactions below xmin has committed or never will.
        let horizon = FeedPosition(transaction: bounds.xmin - 1, position: .max)
        let below: SQL = "\(Self.after(cursor)) AND tx_id < \(String(bounds.xmin))::text::xid8"
        var through = horizon
        if let scanLimit, let last = try await nth(scanLimit, where: below) { through = last }
        if let limit, let last = try await nth(limit, where: "app_id = \(app) AND \(below) AND \(Self.upTo(through))") {
            through = last
        }
        return Range(app: app, after: cursor, through: max(through, cursor), complete: through == horizon)
    }

    /// The position of the `n`th event of the log matching `condition`, in the feed's order; nil when
    /// fewer match.
    private func nth(_ n: Int, where condition: SQL) async throws -> FeedPosition? {
        // The ORDER BY names the table's columns: the output column `tx_id::text` would sort as text,
        // and "100" comes before "99".
        let rows = try await pool.query(
            """
            SELECT tx_id::text, position FROM event_log WHERE \(condition)
            ORDER BY event_log.tx_id, event_log.position OFFSET \(Int64(max(n, 1) - 1)) LIMIT 1
            """, logger: logger)
        for try await (transaction, position) in rows.decode((String, Int64).self) {
            return FeedPosition(transaction: UInt64(transaction) ?? 0, position: position)
        }
        return nil
    }

    /// Writes the events of `range` as `format` (a CSV starts with its header line), one page's text per
    /// call of `write`; returns how many events it wrote.
    @discardableResult
    public func write(
        _ range: Range, as format: EventExportFormat, to write: (String) async throws -> Void
    ) async throws -> Int {
        if format == .csv { try await write(CSVTable.line(EventExportFormat.columns)) }
        return try await pages(
            of: Self.row, select: format == .ndjson ? Self.json : Self.texts, where: "e.app_id = \(range.app)",
            after: range.after, through: range.through
        ) { rows in
            var page = ""
            for row in rows.rows {
                let cells = row.makeRandomAccess()
                if format == .ndjson {
                    page += try cells[1].decode(String.self) + "\n"
                } else {
                    page += CSVTable.line(try (0..<cells.count).map { try cells[$0].decode(String?.self) ?? "" })
                }
            }
            try await write(page)
        }
    }

    /// The columns of the log in the table's order: what a month's archive holds, each row as `COPY`
    /// reads it back into a table like `event_log`.
    public static let archiveColumns = [
        "event_id", "occurred_at", "recorded_at", "app_id", "type", "install_id", "platform", "app_version", "stream_id",
        "stream_version", "tx_id", "position", "data",
    ]

    /// Writes every event of `month` (all apps) in `COPY`'s text format, in the feed's order, one page's
    /// bytes per call of `write`; returns how many it wrote.
    public func writeArchive(of month: LogMonth, to write: (ByteBuffer) async throws -> Void) async throws -> Int {
        try await pages(
            of: Self.archiveRow, select: Self.archiveTexts, where: Self.within(month), after: .start,
            through: FeedPosition(transaction: .max, position: .max)
        ) { rows in
            var copy = CopyRows(width: Self.archiveColumns.count)
            for row in rows.rows {
                let cells = row.makeRandomAccess()
                copy.append(try (1..<cells.count).map { try cells[$0].decode(String?.self) })
            }
            try await write(copy.bytes)
        }
    }

    /// How many events `month` holds.
    public func count(of month: LogMonth) async throws -> Int {
        let rows = try await pool.query("SELECT count(*)::int8 FROM event_log AS e WHERE \(Self.within(month))", logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    static func within(_ month: LogMonth) -> SQL { "e.occurred_at >= \(month.start) AND e.occurred_at < \(month.end)" }

    /// Pages of `select` over `row` (a lateral of `event_log AS e`, its first column `cursor`), for the
    /// rows matching `condition` after `after` up to and including `through`, in the feed's order:
    /// `page` gets each page's rows; returns how many rows there were.
    private func pages(
        of row: SQL, select: SQL, where condition: SQL, after: FeedPosition, through: FeedPosition,
        _ page: (Rows) async throws -> Void
    ) async throws -> Int {
        var cursor = after
        var count = 0
        while cursor < through {
            let rows = try await pool.query(
                """
                SELECT c.cursor, \(select)
                FROM event_log AS e CROSS JOIN LATERAL (SELECT \(row)) AS c
                WHERE \(condition) AND \(Self.after(cursor, columns: "(e.tx_id, e.position)"))
                  AND \(Self.upTo(through, columns: "(e.tx_id, e.position)"))
                ORDER BY e.tx_id, e.position LIMIT \(Int64(pageSize))
                """, logger: logger)
            guard let last = rows.rows.last else { break }
            let text = try last.makeRandomAccess()[0].decode(String.self)
            guard let next = FeedPosition(cursor: text) else { throw FieldError("cursor", "the log gave '\(text)'") }
            try await page(rows)
            count += rows.count
            cursor = next
            if rows.count < pageSize { break }
        }
        return count
    }

    /// `(tx_id, position) > cursor`, the feed's order.
    static func after(_ cursor: FeedPosition, columns: SQL = "(tx_id, position)") -> SQL {
        "\(columns) > (\(String(cursor.transaction))::text::xid8, \(cursor.position))"
    }

    /// `(tx_id, position) <= through`.
    static func upTo(_ through: FeedPosition, columns: SQL = "(tx_id, position)") -> SQL {
        "\(columns) <= (\(String(through.transaction))::text::xid8, \(through.position))"
    }

    /// The columns of a row (``EventExportFormat/columns``), times in RFC 3339 UTC to the microsecond.
    static let row: SQL = """
        e.tx_id::text || ':' || e.position AS cursor, e.event_id,
        to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at,
        to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS recorded_at,
        e.app_id, e.type, e.install_id, e.platform, e.app_version, e.stream_id, e.stream_version, e.data
        """
    /// NDJSON: the row as one JSON object, its members in column order, `data` nested.
    static let json: SQL = "row_to_json(c)::text"
    /// CSV: every column after the cursor as text (`data` as JSON text).
    static let texts: SQL = """
        c.event_id::text, c.occurred_at, c.recorded_at, c.app_id, c.type, c.install_id::text, c.platform, c.app_version,
        c.stream_id, c.stream_version::text, c.data::text
        """
    /// A month's archive: the cursor, then every column of the log as text that its type reads back;
    /// times in RFC 3339 UTC to the microsecond.
    static let archiveRow: SQL = """
        e.tx_id::text || ':' || e.position AS cursor, e.event_id::text AS event_id,
        to_char(e.occurred_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS occurred_at,
        to_char(e.recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS recorded_at,
        e.app_id, e.type, e.install_id::text AS install_id, e.platform, e.app_version, e.stream_id,
        e.stream_version::text AS stream_version, e.tx_id::text AS tx_id, e.position::text AS position, e.data::text AS data
        """
    /// The columns of ``archiveColumns`` from ``archiveRow``.
    static let archiveTexts: SQL = """
        c.event_id, c.occurred_at, c.recorded_at, c.app_id, c.type, c.install_id, c.platform, c.app_version, c.stream_id,
        c.stream_version, c.tx_id, c.position, c.data
        """
}
