import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// Finds the key behind `Authorization: Bearer …` in memory: every live key is loaded at start and
/// reloaded within `refreshInterval` of any creation or revocation. No request's token costs a database
/// look-up, so a flood of made-up tokens takes no pool connection and pushes no real key out of a cache,
/// and keys keep working while the database is away.
final class KeyAuthenticator: Service, Sendable {
    private struct Directory {
        var fingerprint: String?
        var keys: [String: APIKey] = [:]
    }

    private let store: KeyStore
    private let refreshInterval: Duration
    private let readiness: Readiness
    private let logger: Logger
    private let directory = Mutex(Directory())

    init(store: KeyStore, refreshInterval: Duration, readiness: Readiness, logger: Logger) {
        self.store = store
        self.refreshInterval = refreshInterval
        self.readiness = readiness
        self.logger = logger
    }

    /// Loads the keys (before the server starts).
    func load() async throws {
        let fingerprint = try await store.fingerprint()
        let keys = try await store.liveKeys()
        directory.withLock { $0 = Directory(fingerprint: fingerprint, keys: keys) }
        readiness.mark("keys")
    }

    func run() async {
        while !Task.isCancelledOrShuttingDown {
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: self.refreshInterval) }
            } catch {
                return
            }
            do {
                let fingerprint = try await withDeadline(.seconds(2)) { try await self.store.fingerprint() }
                guard fingerprint != directory.withLock({ $0.fingerprint }) else { continue }
                try await load()
                logger.debug("keys reloaded", metadata: ["keys.count": "\(directory.withLock { $0.keys.count })"])
            } catch {
                logger.debug("keys not reloaded; keeping the last ones", metadata: ["error": "\(error)"])
            }
        }
    }

    /// The key for this request, or `401` when missing, malformed, unknown or revoked.
    func authenticate(_ request: Request) throws -> APIKey {
        guard let header = request.headers[.authorization] else {
            throw ProblemDetails.unauthorized("send Authorization: Bearer <key>")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else {
            throw ProblemDetails.unauthorized("send Authorization: Bearer <key>")
        }
        guard let key = key(secret: String(parts[1])) else { throw ProblemDetails.unauthorized("unknown or revoked key") }
        return key
    }

    /// The live key with this secret; nil for anything else, without hashing what has not the shape of a
    /// secret (`upshift_<scope>_` and 43 base64url characters).
    func key(secret: String) -> APIKey? {
        guard KeySecret.hasShape(secret) else { return nil }
        let digest = KeySecret.digest(secret)
        return directory.withLock { $0.keys[digest] }
    }

    /// The admin (or, for reads, read) token of the request, covering `app` (nil: every app).
    func authorize(_ request: Request, app: String?, write: Bool) throws -> APIKey {
        try permit(authenticate(request), app: app, write: write)
    }

    /// `key`, when it may read (or write) `app` (nil: create apps); else `403`.
    func permit(_ key: APIKey, app: String?, write: Bool) throws -> APIKey {
        switch key.scope {
        case .admin: break
        case .read where !write: break
        default: throw ProblemDetails.forbidden(write ? "an admin token is required" : "a read or admin token is required")
        }
        if let app {
            guard key.covers(app: app) else { throw ProblemDetails.forbidden("the token does not cover app \(app)") }
        } else if key.appId != nil {
            throw ProblemDetails.forbidden("creating an app needs an admin token that covers every app")
        }
        return key
    }
}
