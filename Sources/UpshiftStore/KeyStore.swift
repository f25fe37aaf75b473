import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A key or token as stored: never its secret, only the secret's digest.
public struct APIKey: Sendable, Equatable, Codable {
    public var id: UUID
    public var name: String
    public var scope: KeyScope
    /// The one app it covers; nil for a read or admin token that covers every app.
    public var appId: AppID?
    public var createdAt: Date
    public var revokedAt: Date?

    /// How catalog history names the key: its label and id, since labels need not be unique.
    public var actor: String { "\(name) (\(id.uuidString.lowercased().prefix(8)))" }

    /// Whether the key may act on `app`.
    public func covers(app: AppID) -> Bool {
        appId == nil || appId == app
    }
}

public enum KeyStoreError: Error, CustomStringConvertible, Equatable {
    case ingestKeyNeedsApp
    case unknownApp(String)
    case unknownKey(String)
    case ambiguousKey(String)

    public var description: String {
        switch self {
        case .ingestKeyNeedsApp: "an ingest key belongs to one app: pass --app"
        case .unknownApp(let app): "no app \(app)"
        case .unknownKey(let key): "no key \(key)"
        case .ambiguousKey(let name): "several keys are named \(name): revoke by id"
        }
    }
}

/// The `api_keys` table.
public struct KeyStore: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Creates a key and returns it with its secret, which is shown once and never stored.
    public func create(name: String, scope: KeyScope, appId: AppID?, now: Date) async throws -> (APIKey, String) {
        if scope == .ingest, appId == nil { throw KeyStoreError.ingestKeyNeedsApp }
        if let appId {
            let rows = try await pool.query("SELECT 1 FROM apps WHERE app_id = \(appId)", logger: logger)
            var exists = false
            for try await _ in rows { exists = true }
            guard exists else { throw KeyStoreError.unknownApp(appId.rawValue) }
        }
        let secret = KeySecret.generate(scope: scope)
        let key = APIKey(id: UUID(), name: name, scope: scope, appId: appId, createdAt: now, revokedAt: nil)
        try await pool.query(
            """
            INSERT INTO api_keys (key_id, name, scope, app_id, secret_digest, created_at)
            VALUES (\(key.id), \(name), \(scope.rawValue), \(appId), \(KeySecret.digest(secret)), \(now))
            """, logger: logger)
        return (key, secret)
    }

    /// The live (not revoked) key whose secret has this digest.
    public func find(digest: String) async throws -> APIKey? {
        let rows = try await pool.query(
            """
            SELECT key_id, name, scope, app_id, created_at, revoked_at FROM api_keys
            WHERE secret_digest = \(digest) AND revoked_at IS NULL
            """, logger: logger)
        for try await row in rows.decode((UUID, String, String, AppID?, Date, Date?).self) {
            return APIKey(
                id: row.0, name: row.1, scope: KeyScope(rawValue: row.2) ?? .read, appId: row.3, createdAt: row.4,
                revokedAt: row.5)
        }
        return nil
    }

    /// Every key, oldest first.
    public func list() async throws -> [APIKey] {
        let rows = try await pool.query(
            "SELECT key_id, name, scope, app_id, created_at, revoked_at FROM api_keys ORDER BY created_at, name",
            logger: logger)
        var keys: [APIKey] = []
        for try await row in rows.decode((UUID, String, String, AppID?, Date, Date?).self) {
            keys.append(
                APIKey(
                    id: row.0, name: row.1, scope: KeyScope(rawValue: row.2) ?? .read, appId: row.3,
                    createdAt: row.4, revokedAt: row.5))
        }
        return keys
    }

    /// Revokes the key with this id (or, when unique, this name). Revoking twice is harmless.
    public func revoke(_ idOrName: String, now: Date) async throws -> APIKey {
        // By id any key; by name only live ones, so that a name can be reused after a revocation.
        let keys = try await list().filter {
            $0.id.uuidString.lowercased() == idOrName.lowercased() || ($0.name == idOrName && $0.revokedAt == nil)
        }
        guard keys.count <= 1 else { throw KeyStoreError.ambiguousKey(idOrName) }
        guard var key = keys.first else { throw KeyStoreError.unknownKey(idOrName) }
        if key.revokedAt == nil {
            try await pool.query(
                "UPDATE api_keys SET revoked_at = \(now) WHERE key_id = \(key.id) AND revoked_at IS NULL",
                logger: logger)
            key.revokedAt = now
        }
        return key
    }
}

extension KeyStore {
    /// Every live key by the digest of its secret: the server keeps them all in memory, so that no
    /// request's token costs a database look-up.
    public func liveKeys() async throws -> [String: APIKey] {
        let rows = try await pool.query(
            """
            SELECT secret_digest, key_id, name, scope, app_id, created_at FROM api_keys WHERE revoked_at IS NULL
            """, logger: logger)
        var keys: [String: APIKey] = [:]
        for try await row in rows.decode((String, UUID, String, String, AppID?, Date).self) {
            guard let scope = KeyScope(rawValue: row.3) else { continue }
            keys[row.0] = APIKey(id: row.1, name: row.2, scope: scope, appId: row.4, createdAt: row.5, revokedAt: nil)
        }
        return keys
    }

    /// Changes whenever a key is created or revoked: a cheap question to ask every second.
    public func fingerprint() async throws -> String {
        let rows = try await pool.query(
            """
            SELECT count(*)::text || '/' || count(revoked_at)::text || '/' || coalesce(max(created_at)::text, '')
                   || '/' || coalesce(max(revoked_at)::text, '')
            FROM api_keys
            """, logger: logger)
        for try await text in rows.decode(String.self) { return text }
        return ""
    }
}
