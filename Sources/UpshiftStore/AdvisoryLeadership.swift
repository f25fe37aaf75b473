import Logging
import PostgresNIO

/// One instance at a time for a background job: a connection of its own that holds a session advisory
/// lock for as long as the job runs. Closing the connection lets go of the lock; so does the end of a
/// process killed meanwhile, and another instance takes over at its next attempt.
public enum AdvisoryLeadership {
    /// The connection that holds the lock.
    public struct Lease: Sendable {
        let connection: StoreConnection

        /// The connection closed (PostgreSQL restarted, the network failed): the lock is gone, and
        /// another instance may hold it now.
        public var isLost: Bool { connection.isClosed }
    }

    /// Opens a connection for `settings` (within `timeout`) and runs `body` on it when this instance
    /// takes the lock `key`, with a heartbeat beside it (``LeaderHeartbeat``): nil at once when another
    /// instance holds it (after ending that instance's session if it stopped answering).
    public static func whileHolding<T: Sendable>(
        _ key: String, settings: DatabaseSettings, applicationName: String, timeout: Duration, logger: Logger,
        _ body: @Sendable (Lease) async throws -> T
    ) async throws -> T? {
        let connection = try await Database.connect(settings, applicationName: applicationName, within: timeout, logger: logger)
        do {
            let result: T?
            if try await lock(key, on: connection, role: applicationName, limit: timeout, logger: logger) {
                result = try await LeaderHeartbeat.beside(connection, role: applicationName, logger: logger) { _ in
                    try await body(Lease(connection: connection))
                }
            } else {
                result = nil
            }
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }

    /// Takes the lock `key` on `connection` (within `limit`): false when another session holds it,
    /// after ending that session if its leader stopped answering (``LeaderHeartbeat``).
    static func lock(
        _ key: String, on connection: StoreConnection, role: String, limit: Duration, logger: Logger
    ) async throws -> Bool {
        try await withDeadline(limit, abandonWhen: { connection.isClosed }) {
            for attempt in 0..<2 {
                var acquired = false
                for try await value in try await connection.query(
                    "SELECT pg_try_advisory_lock(hashtextextended(\(key), 0))", logger: logger
                ).decode(Bool.self) { acquired = value }
                if acquired {
                    // A session's locks outlive its dead client until PostgreSQL notices, which a backend
                    // busy with a statement does only when it ends: a leader killed inside a long batch or
                    // backfill would keep its projection from the standbys that long. This has PostgreSQL
                    // (14+, on Linux, macOS and the BSDs) check for the client every second meanwhile; where
                    // it cannot, nothing changes.
                    _ = try? await connection.query("SET client_connection_check_interval = '1s'", logger: logger)
                    return true
                }
                guard attempt == 0,
                    try await LeaderHeartbeat.endStaleHolder(of: key, on: connection, role: role, logger: logger)
                else { return false }
            }
            return false
        }
    }
}
