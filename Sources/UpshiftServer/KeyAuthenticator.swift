import Foundation
import Hummingbird
import Synchronization
import UpshiftCore
import UpshiftStore

/// Finds the key behind `Authorization: Bearer …`, caching look-ups for a few seconds so that the
/// ingestion hot path does not read `api_keys` on every request.
final class KeyAuthenticator: Sendable {
    private struct Entry {
        var key: APIKey?
        var expires: ContinuousClock.Instant
    }

    private let keys: KeyStore
    private let ttl: Duration
    private let cache = Mutex<[String: Entry]>([:])
    private static let maximumEntries = 10_000

    init(keys: KeyStore, cacheSeconds: Double) {
        self.keys = keys
        self.ttl = .milliseconds(Int64(cacheSeconds * 1000))
    }

    /// The key for this request, or a problem: `401` when missing, unknown or revoked, `503` when the
    /// database cannot be asked.
    func authenticate(_ request: Request) async throws -> APIKey {
        guard let header = request.headers[.authorization] else {
            throw ProblemDetails.unauthorized("send Authorization: Bearer <key>")
        }
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "bearer", !parts[1].isEmpty else {
            throw ProblemDetails.unauthorized("send Authorization: Bearer <key>")
        }
        let digest = KeySecret.digest(String(parts[1]))
        let now = ContinuousClock.now
        if let entry = cache.withLock({ $0[digest] }), entry.expires > now {
            guard let key = entry.key else { throw ProblemDetails.unauthorized("unknown or revoked key") }
            return key
        }
        let key: APIKey?
        do {
            key = try await keys.find(digest: digest)
        } catch {
            throw ProblemDetails.unavailable("the database is unreachable; retry later")
        }
        cache.withLock { cache in
            if cache.count >= Self.maximumEntries { cache.removeAll(keepingCapacity: true) }
            cache[digest] = Entry(key: key, expires: now.advanced(by: ttl))
        }
        guard let key else { throw ProblemDetails.unauthorized("unknown or revoked key") }
        return key
    }

    /// The admin (or, for reads, read) token of the request, covering `app` (nil: every app).
    func authorize(_ request: Request, app: String?, write: Bool) async throws -> APIKey {
        let key = try await authenticate(request)
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
