import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The append-only `event_log` table (DESIGN.md 5.1).
public struct EventLog: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Appends `events` in one statement and one transaction (group commit), recorded at `recordedAt`.
    /// Returns the ids that were new; the others were already stored (retries) and are duplicates.
    ///
    /// Callers pass distinct ids: a second copy of an id in one call would be reported as stored twice.
    public func append(_ events: [Event], recordedAt: Date) async throws -> Set<UUID> {
        guard !events.isEmpty else { return [] }
        var ids: [UUID] = [], occurred: [Date] = [], apps: [String] = [], types: [String] = []
        var installs: [UUID] = [], platforms: [String] = [], versions: [String] = [], data: [String] = []
        ids.reserveCapacity(events.count)
        for event in events {
            ids.append(event.id)
            occurred.append(event.occurredAt.forPostgres)
            apps.append(event.appId)
            types.append(event.type.rawValue)
            installs.append(event.installId)
            platforms.append(event.platform)
            versions.append(event.appVersion)
            data.append(event.data)
        }
        let rows = try await client.query(
            """
            INSERT INTO event_log
                (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
            SELECT e.id, e.occurred_at, \(recordedAt.forPostgres), e.app_id, e.type, e.install_id, e.platform, e.app_version,
                   e.data::jsonb
            FROM unnest(\(ids)::uuid[], \(occurred)::timestamptz[], \(apps)::text[], \(types)::text[],
                        \(installs)::uuid[], \(platforms)::text[], \(versions)::text[], \(data)::text[])
                 AS e(id, occurred_at, app_id, type, install_id, platform, app_version, data)
            ON CONFLICT DO NOTHING
            RETURNING event_id
            """, logger: logger)
        var inserted = Set<UUID>(minimumCapacity: events.count)
        for try await id in rows.decode(UUID.self) {
            inserted.insert(id)
        }
        return inserted
    }

    /// The ids of `events` the log already holds (same id, `occurredAt`, app and install): one primary-key
    /// probe each.
    public func storedIds(of events: [Event]) async throws -> Set<UUID> {
        guard !events.isEmpty else { return [] }
        let ids = events.map(\.id), occurred = events.map(\.occurredAt.forPostgres)
        let apps = events.map(\.appId), installs = events.map(\.installId)
        let rows = try await client.query(
            """
            SELECT l.event_id
            FROM unnest(\(ids)::uuid[], \(occurred)::timestamptz[], \(apps)::text[], \(installs)::uuid[])
                 AS e(id, occurred_at, app_id, install_id)
            JOIN event_log l ON l.event_id = e.id AND l.occurred_at = e.occurred_at
                             AND l.app_id = e.app_id AND l.install_id = e.install_id
            """, logger: logger)
        var stored = Set<UUID>()
        for try await id in rows.decode(UUID.self) { stored.insert(id) }
        return stored
    }

    /// Creates the monthly partitions that cover (now − 31 days) … (now + 2 months), as DESIGN.md 5.1
    /// asks, and returns how many were new.
    @discardableResult
    public func ensurePartitions(now: Date) async throws -> Int {
        let from = now.addingTimeInterval(-31 * 86_400)
        let to = Calendar.utc.date(byAdding: .month, value: 2, to: now) ?? now.addingTimeInterval(62 * 86_400)
        let rows = try await client.query(
            "SELECT upshift_ensure_event_partitions(\(from), \(to))", logger: logger)
        for try await created in rows.decode(Int.self) { return created }
        return 0
    }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar
    }()
}
