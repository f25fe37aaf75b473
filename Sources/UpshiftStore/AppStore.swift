import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// An app of the catalog.
public struct App: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public var defaultLocale: String
    public var createdAt: Date
}

public enum AppStoreError: Error, CustomStringConvertible, Equatable {
    case invalidID(String)
    case exists(String)

    public var description: String {
        switch self {
        case .invalidID(let id): "app id \(id) must match ^[a-z0-9][a-z0-9-]{0,62}$"
        case .exists(let id): "app \(id) already exists"
        }
    }
}

/// Apps, created as the first event of their stream `app:{id}` (DESIGN.md 5.1).
public struct AppStore: Sendable {
    let client: PostgresClient
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.client = client
        self.logger = logger
    }

    /// Creates an app: the `app_created` event, the stream head and the `apps` row in one transaction.
    public func create(id: String, name: String, defaultLocale: String = "en", actor: String, reason: String?, now: Date)
        async throws -> App
    {
        guard AppID.isValid(id) else { throw AppStoreError.invalidID(id) }
        let app = App(id: id, name: name, defaultLocale: defaultLocale, createdAt: now)
        var data = EventData()
        data.add("name", name)
        data.add("defaultLocale", defaultLocale)
        data.add("actor", actor)
        data.add("reason", reason)
        let event = data.json
        let stream = "app:\(id)"
        try await client.withTransaction(logger: logger) { connection in
            // A new stream starts at version 1; an existing head means the app exists.
            let head = try await connection.query(
                "INSERT INTO streams (stream_id, version) VALUES (\(stream), 1) ON CONFLICT DO NOTHING RETURNING version",
                logger: logger)
            var created = false
            for try await _ in head { created = true }
            guard created else { throw AppStoreError.exists(id) }
            try await connection.query("SELECT upshift_ensure_event_partitions(\(now), \(now))", logger: logger)
            try await connection.query(
                """
                INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data)
                VALUES (\(UUID()), \(now), \(now), \(id), 'app_created', \(stream), 1, \(event)::jsonb)
                """, logger: logger)
            try await connection.query(
                """
                INSERT INTO apps (app_id, name, default_locale, created_at)
                VALUES (\(id), \(name), \(defaultLocale), \(now))
                """, logger: logger)
        }
        return app
    }

    public func find(id: String) async throws -> App? {
        try await list(id: id).first
    }

    public func list(id: String? = nil) async throws -> [App] {
        let rows = try await client.query(
            """
            SELECT app_id, name, default_locale, created_at FROM apps
            WHERE \(id)::text IS NULL OR app_id = \(id) ORDER BY app_id
            """, logger: logger)
        var apps: [App] = []
        for try await row in rows.decode((String, String, String, Date).self) {
            apps.append(App(id: row.0, name: row.1, defaultLocale: row.2, createdAt: row.3))
        }
        return apps
    }
}
