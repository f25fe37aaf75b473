import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// An event as read back from the log.
public struct StoredEvent: Sendable, Equatable {
    public var feedPosition: FeedPosition
    public var id: UUID
    public var occurredAt: Date
    public var recordedAt: Date
    public var appId: String
    public var type: String
    public var installId: UUID?
    public var platform: String?
    public var appVersion: String?
    public var streamId: String?
    /// The `data` column as JSON text.
    public var data: String
}

/// Reads the event log in commit-safe order (DESIGN.md 5.2).
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
    public func read(after position: FeedPosition, limit: Int) async throws -> [StoredEvent] {
        let rows = try await client.query(
            """
            SELECT tx_id::text, position, event_id, occurred_at, recorded_at, app_id, type, install_id,
                   platform, app_version, stream_id, data::text
            FROM event_log
            WHERE (tx_id, position) > (\(String(position.transaction))::text::xid8, \(position.position))
              AND tx_id < pg_snapshot_xmin(pg_current_snapshot())
            ORDER BY event_log.tx_id, event_log.position
            LIMIT \(limit)
            """, logger: logger)
        var events: [StoredEvent] = []
        events.reserveCapacity(limit)
        for try await row in rows.decode(
            (String, Int64, UUID, Date, Date, String, String, UUID?, String?, String?, String?, String).self)
        {
            events.append(
                StoredEvent(
                    feedPosition: FeedPosition(transaction: UInt64(row.0) ?? 0, position: row.1),
                    id: row.2, occurredAt: row.3, recordedAt: row.4, appId: row.5, type: row.6, installId: row.7,
                    platform: row.8, appVersion: row.9, streamId: row.10, data: row.11))
        }
        return events
    }
}
