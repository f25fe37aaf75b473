import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A dashboard session: the key it was signed in with and the token its forms must carry.
public struct DashboardSession: Sendable, Equatable {
    public var key: APIKey
    public var csrfToken: String
    public var expiresAt: Date
}

/// The `dashboard_sessions` table. The browser holds the token; the table holds its digest.
public struct SessionStore: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Starts a session for `key`; returns the token for the cookie (shown to no one else) and the session.
    /// Expired sessions are removed on the way.
    public func create(key: APIKey, now: Date, lifetime: TimeInterval) async throws -> (token: String, session: DashboardSession) {
        let token = KeySecret.randomToken()
        let session = DashboardSession(key: key, csrfToken: KeySecret.randomToken(), expiresAt: now.addingTimeInterval(lifetime))
        try await pool.query("DELETE FROM dashboard_sessions WHERE expires_at <= \(now)", logger: logger)
        try await pool.query(
            """
            INSERT INTO dashboard_sessions (token_digest, key_id, csrf_token, created_at, expires_at)
            VALUES (\(KeySecret.digest(token)), \(key.id), \(session.csrfToken), \(now), \(session.expiresAt))
            """, logger: logger)
        return (token, session)
    }

    /// The live session for this token: not expired, its key not revoked.
    public func find(token: String, now: Date) async throws -> DashboardSession? {
        let rows = try await pool.query(
            """
            SELECT k.key_id, k.name, k.scope, k.app_id, k.created_at, s.csrf_token, s.expires_at
            FROM dashboard_sessions s JOIN api_keys k USING (key_id)
            WHERE s.token_digest = \(KeySecret.digest(token)) AND s.expires_at > \(now) AND k.revoked_at IS NULL
            """, logger: logger)
        for try await row in rows.decode((UUID, String, String, AppID?, Date, String, Date).self) {
            let key = APIKey(
                id: row.0, name: row.1, scope: KeyScope(rawValue: row.2) ?? .read, appId: row.3, createdAt: row.4,
                revokedAt: nil)
            return DashboardSession(key: key, csrfToken: row.5, expiresAt: row.6)
        }
        return nil
    }

    /// Ends the session (sign-out); ending one that is gone is harmless.
    public func delete(token: String) async throws {
        try await pool.query("DELETE FROM dashboard_sessions WHERE token_digest = \(KeySecret.digest(token))", logger: logger)
    }
}
