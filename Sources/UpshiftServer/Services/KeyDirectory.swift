import Foundation
import Logging
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// Every live key, in memory: loaded at start and reloaded within `refreshInterval` of any creation or
/// revocation. ``BearerAuthentication`` and the dashboard's sign-in find keys here. No request's token
/// costs a database look-up, so a flood of made-up tokens takes no pool connection and pushes no real
/// key out of a cache, and keys keep working while the database is away.
final class KeyDirectory: Service, Sendable {
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
        readiness.mark(.keys)
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

    /// The live key with this secret; nil for anything else, without hashing what has not the shape of a
    /// secret (`upshift_<scope>_` and 43 base64url characters).
    func key(secret: String) -> APIKey? {
        guard KeySecret.hasShape(secret) else { return nil }
        let digest = KeySecret.digest(secret)
        return directory.withLock { $0.keys[digest] }
    }
}
