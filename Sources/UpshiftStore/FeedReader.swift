import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// Reads the event log in commit-safe order (docs/ARCHITECTURE.md, "The gap-free feed"), as projections
/// see it: the fixed columns, the few `data` fields they use (extracted by PostgreSQL), and the whole `data`
/// of catalog events.
///
/// Sequence values are taken before commit, so ordering by `position` alone would skip an event whose
/// transaction commits after a later one's. The reader orders by (`tx_id`, `position`) and stops below
/// the oldest transaction still running, so everything it returns is final and nothing can appear
/// before it later.
public struct FeedReader: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// The next at most `limit` events after `position`.
    public func read(after position: FeedPosition, limit: Int) async throws -> [ProjectionEvent] {
        try await DatabasePool(client: client, logger: logger).withConnection { connection in
            try await Self.read(on: connection, after: position, limit: limit, logger: logger)
        }
    }

    /// Below `keptThrough` (the last place in the feed a dropped event had, ``LogRetention``), the catalog
    /// events kept from dropped months are read too, each at its place.
    static func read(
        on connection: StoreConnection, after position: FeedPosition, limit: Int, keptThrough: FeedPosition? = nil,
        logger: Logger
    ) async throws -> [ProjectionEvent] {
        if let keptThrough, position < keptThrough {
            return try await readWithKept(on: connection, after: position, limit: limit, logger: logger)
        }
        // The ORDER BY names the table's columns: the output column `tx_id::text` would sort as text.
        let rows = try await connection.query(
            """
            SELECT \(columns) FROM event_log
            WHERE (tx_id, position) > (\(String(position.transaction))::text::xid8, \(position.position))
              AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY event_log.tx_id, event_log.position
            LIMIT \(limit)
            """ as SQL, logger: logger)
        return try await decode(rows, reserving: limit)
    }

    /// The log's events after `position` and the kept catalog events (`catalog_events_kept`) after it, in the
    /// feed's order: what a generation built after months were dropped reads first.
    private static func readWithKept(on connection: StoreConnection, after position: FeedPosition, limit: Int, logger: Logger)
        async throws -> [ProjectionEvent]
    {
        let after: SQL = "(\(String(position.transaction))::text::xid8, \(position.position))"
        let rows = try await connection.query(
            """
            SELECT \(columns) FROM (
                SELECT \(rowColumns) FROM event_log
                WHERE (tx_id, position) > \(after) AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
                UNION ALL
                \(keptCatalogEvents) AND (tx_id, position) > \(after)
            ) AS event_log
            ORDER BY event_log.tx_id, event_log.position
            LIMIT \(limit)
            """ as SQL, logger: logger)
        return try await decode(rows, reserving: limit)
    }

    /// How many events of the log lie after `position`, counted up to `cap` (the projection lag an
    /// operator sees; committed events only, not just those below the snapshot horizon).
    static func backlog(on connection: StoreConnection, after position: FeedPosition, cap: Int, logger: Logger)
        async throws -> Int
    {
        let rows = try await connection.query(
            """
            SELECT count(*)::int8 FROM (
                SELECT 1 FROM event_log
                WHERE (tx_id, position) > (\(String(position.transaction))::text::xid8, \(position.position))
                LIMIT \(cap)) AS beyond
            """ as SQL, logger: logger)
        for try await count in rows.decode(Int.self) { return count }
        return 0
    }

    /// The log's columns that `columns` reads, for a union with ``keptCatalogEvents``.
    static let rowColumns: SQL =
        "tx_id, position, event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data"

    /// The catalog events kept from dropped months with their places in the feed, as rows of the log
    /// (``rowColumns``); a condition may follow (`AND …`).
    static let keptCatalogEvents: SQL = """
        SELECT tx_id, position, event_id, occurred_at, recorded_at, app_id, type, NULL::uuid, NULL::text, NULL::text, data
        FROM catalog_events_kept WHERE tx_id IS NOT NULL
        """

    /// What a projection reads of an event (`ProjectionEvent`), each column named as `decode` reads it.
    static let columns: SQL = """
        tx_id::text AS tx, position, event_id, occurred_at, recorded_at, app_id, type, install_id, platform,
        app_version, data->>'osVersion' AS os_version, data->>'locale' AS locale, data->>'promptKind' AS prompt_kind,
        data->>'targetVersion' AS target_version, data->>'dismissAction' AS dismiss_action,
        CASE WHEN type = 'checked' THEN coalesce(data->>'channel', 'live') END AS channel,
        CASE WHEN install_id IS NULL THEN data::text END AS catalog_data
        """

    /// Events from rows that select `columns`, each field read by its column's name.
    static func decode(_ rows: Rows, reserving capacity: Int = 0) async throws -> [ProjectionEvent] {
        var events: [ProjectionEvent] = []
        events.reserveCapacity(capacity)
        for try await row in rows {
            let cells = row.makeRandomAccess()
            func text(_ column: String) throws -> String? { try cells[column].decode(String?.self) }
            events.append(
                ProjectionEvent(
                    feedPosition: FeedPosition(
                        transaction: UInt64(try cells["tx"].decode(String.self)) ?? 0,
                        position: try cells["position"].decode(Int64.self)),
                    id: try cells["event_id"].decode(UUID.self), occurredAt: try cells["occurred_at"].decode(Date.self),
                    recordedAt: try cells["recorded_at"].decode(Date.self), appId: try cells["app_id"].decode(AppID.self),
                    type: try cells["type"].decode(String.self), installId: try cells["install_id"].decode(UUID?.self),
                    platform: try text("platform"), appVersion: try text("app_version"), osVersion: try text("os_version"),
                    locale: try text("locale"), promptKind: try text("prompt_kind"), targetVersion: try text("target_version"),
                    dismissAction: try text("dismiss_action"), channel: try text("channel"),
                    catalogData: try text("catalog_data")))
        }
        return events
    }
}
