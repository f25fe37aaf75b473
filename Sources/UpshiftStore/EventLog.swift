import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The append-only `event_log` table (docs/ARCHITECTURE.md, "Append-only").
public struct EventLog: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Appends `events` in one transaction (group commit), recorded at `recordedAt`, and returns, for each
    /// of them by position, whether this append stored it, once COMMIT has succeeded (the rows of a
    /// statement in an implicit transaction reach the client before its commit, so the transaction is
    /// explicit). PostgreSQL answers with the positions it did not store, usually none: no row per event
    /// crosses the connection.
    ///
    /// Client events first claim their (app, id) in `event_ids`, in key order, so that concurrent appends
    /// sharing ids wait for each other in one order and never deadlock; an event whose (app, id) is
    /// already claimed is not stored (a resend, or a conflict: ``storedEvents(matching:)`` tells which).
    /// The rows then go to the log in the order given (their positions): no two appends hold the same
    /// (id, time, app), as each claimed its own. Server-written `checked` events have random ids of the
    /// server's own and go straight to the log.
    ///
    /// Callers pass distinct (app, id) pairs.
    public func append(_ events: [Event], recordedAt: Date) async throws -> [Bool] {
        guard !events.isEmpty else { return [] }
        let statement = AppendEvents(events, recordedAt: recordedAt.forPostgres)
        return try await pool.transaction(logger: logger) { [logger] connection in
            var stored = [Bool](repeating: true, count: events.count)
            for positions in try await connection.rows(prepared: statement, logger: logger) {
                for position in positions where position >= 1 && position <= stored.count { stored[Int(position) - 1] = false }
            }
            return stored
        }
    }

    /// The events stored under the (app, id) of each of `events`, as they were stored: to tell a resend
    /// (every field the same) from another event under a used id. One index probe each.
    public func storedEvents(matching events: [Event]) async throws -> [Event] {
        guard !events.isEmpty else { return [] }
        let apps = events.map(\.appId), ids = events.map(\.id)
        let rows = try await pool.query(
            """
            SELECT l.event_id, l.type, l.occurred_at, l.app_id, l.install_id, l.platform, l.app_version, l.data::text
            FROM unnest(\(apps)::text[], \(ids)::uuid[]) AS q(app_id, id)
            JOIN event_ids i ON i.app_id = q.app_id AND i.event_id = q.id
            JOIN event_log l ON l.event_id = i.event_id AND l.occurred_at = i.occurred_at AND l.app_id = i.app_id
            """, logger: logger)
        var stored: [Event] = []
        for try await row in rows.decode((UUID, String, Date, AppID, UUID?, String?, String?, String).self) {
            guard let type = EventType(rawValue: row.1), let install = row.4,
                let platform = row.5.flatMap(Platform.init(validating:))
            else { continue }
            stored.append(
                Event(
                    id: row.0, type: type, occurredAt: row.2, appId: row.3, installId: install, platform: platform,
                    appVersion: row.6 ?? "", data: row.7))
        }
        return stored
    }

    /// When the newest event of `app` was recorded; nil when the log holds none.
    public func latestRecordedAt(app: AppID) async throws -> Date? {
        var latest: Date?
        for try await value in try await pool.query(
            "SELECT max(recorded_at) FROM event_log WHERE app_id = \(app)", logger: logger
        ).decode(Date?.self) {
            latest = value
        }
        return latest
    }

    /// The events of `app` that belong to an install (client events, and checks that carried one).
    public func installEventCount(app: AppID) async throws -> Int {
        var count = 0
        for try await value in try await pool.query(
            "SELECT count(*)::int8 FROM event_log WHERE app_id = \(app) AND install_id IS NOT NULL", logger: logger
        ).decode(Int.self) { count = value }
        return count
    }

    /// Creates the monthly partitions that cover (now − 31 days) … (now + 2 months) (docs/ARCHITECTURE.md,
    /// "Partitions by month"), and returns how many were new.
    @discardableResult
    public func ensurePartitions(now: Date) async throws -> Int {
        let from = now.addingTimeInterval(-31 * 86_400)
        let to = Calendar.utc.date(byAdding: .month, value: 2, to: now) ?? now.addingTimeInterval(62 * 86_400)
        let rows = try await pool.query(
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

/// The group insert of ``EventLog/append(_:recordedAt:)``, prepared once per connection (PostgresNIO keeps
/// it by name): PostgreSQL parses and plans it once instead of on every flush. It answers one row, so
/// that its answer never waits on its reader between parts (see ``StoreConnection/query(_:logger:file:line:)``:
/// a prepared statement's rows come only as PostgresNIO's async sequence).
struct AppendEvents: PostgresPreparedStatement {
    /// The positions (from 1) of the events not stored.
    typealias Row = [Int64]

    static let sql = """
        WITH input AS (
            SELECT * FROM unnest($1::uuid[], $2::timestamptz[], $3::text[], $4::text[], $5::uuid[], $6::text[], $7::text[],
                                 $8::text[]) WITH ORDINALITY
                 AS e(id, occurred_at, app_id, type, install_id, platform, app_version, data, position)
        ), claimed AS (
            INSERT INTO event_ids (app_id, event_id, occurred_at)
            SELECT app_id, id, occurred_at FROM input WHERE type <> 'checked'
            ORDER BY app_id, id
            ON CONFLICT DO NOTHING
            RETURNING app_id, event_id
        ), stored AS (
            INSERT INTO event_log
                (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
            SELECT e.id, e.occurred_at, $9::timestamptz, e.app_id, e.type, e.install_id, e.platform, e.app_version,
                   e.data::jsonb
            FROM input e
            WHERE e.type = 'checked' OR EXISTS (SELECT 1 FROM claimed c WHERE c.app_id = e.app_id AND c.event_id = e.id)
            ON CONFLICT DO NOTHING
            RETURNING app_id, event_id
        )
        SELECT coalesce(array_agg(e.position), '{}') FROM input e
        WHERE NOT EXISTS (SELECT 1 FROM stored s WHERE s.app_id = e.app_id AND s.event_id = e.id)
        """

    /// Encoded when the statement is made, so that the event loop that sends it (``StoreConnection/rows(prepared:logger:)``)
    /// only copies them.
    let bindings: PostgresBindings

    init(_ events: [Event], recordedAt: Date) {
        var ids: [UUID] = [], occurred: [Date] = [], apps: [AppID] = [], types: [String] = []
        var installs: [UUID] = [], platforms: [Platform] = [], versions: [String] = [], data: [String] = []
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
        var bindings = PostgresBindings(capacity: 9)
        bindings.append(ids)
        bindings.append(occurred)
        bindings.append(apps)
        bindings.append(types)
        bindings.append(installs)
        bindings.append(platforms)
        bindings.append(versions)
        bindings.append(data)
        bindings.append(recordedAt)
        self.bindings = bindings
    }

    func makeBindings() throws -> PostgresBindings { bindings }

    func decodeRow(_ row: PostgresRow) throws -> Row {
        try row.decode([Int64].self)
    }
}
