import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// Reads the event log in commit-safe order (DESIGN.md 5.2), as projections see it: the fixed columns,
/// the few `data` fields they use (extracted by PostgreSQL), and the whole `data` of catalog events.
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
        try await client.withLiveConnection { connection in
            try await Self.read(on: connection, after: position, limit: limit, logger: logger)
        }
    }

    static func read(on connection: PostgresConnection, after position: FeedPosition, limit: Int, logger: Logger)
        async throws -> [ProjectionEvent]
    {
        // The ORDER BY names the table's columns: the output column `tx_id::text` would sort as text.
        let rows = try await connection.query(
            """
            SELECT \(unescaped: columns) FROM event_log
            WHERE (tx_id, position) > (\(String(position.transaction))::text::xid8, \(position.position))
              AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY event_log.tx_id, event_log.position
            LIMIT \(limit)
            """, logger: logger)
        return try await decode(rows, reserving: limit)
    }

    /// What a projection reads of an event (`ProjectionEvent`), in the order `decode` takes it.
    static let columns = """
        tx_id::text, position, event_id, occurred_at, recorded_at, app_id, type, install_id, platform,
        app_version, data->>'osVersion', data->>'locale', data->>'promptKind', data->>'targetVersion',
        data->>'dismissAction', CASE WHEN install_id IS NULL THEN data::text END
        """

    /// Events from rows that select `columns`.
    static func decode(_ rows: PostgresRowSequence, reserving capacity: Int = 0) async throws -> [ProjectionEvent] {
        var events: [ProjectionEvent] = []
        events.reserveCapacity(capacity)
        for try await row in rows.decode(
            (String, Int64, UUID, Date, Date, String, String, UUID?, String?, String?, String?, String?, String?,
             String?, String?, String?).self)
        {
            events.append(
                ProjectionEvent(
                    feedPosition: FeedPosition(transaction: UInt64(row.0) ?? 0, position: row.1), id: row.2,
                    occurredAt: row.3, recordedAt: row.4, appId: row.5, type: row.6, installId: row.7, platform: row.8,
                    appVersion: row.9, osVersion: row.10, locale: row.11, promptKind: row.12, targetVersion: row.13,
                    dismissAction: row.14, catalogData: row.15))
        }
        return events
    }
}
