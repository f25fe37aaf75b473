import Logging
import PostgresNIO

/// One instance at a time for a background job: a connection of its own that holds a session advisory
/// lock for as long as the job runs. Closing the connection lets go of the lock; so does the end of a
/// process killed meanwhile, and another instance takes over at its next attempt.
public enum AdvisoryLeadership {
    /// The connection that holds the lock.
    public struct Lease: Sendable {
        let connection: PostgresConnection

        /// The connection closed (PostgreSQL restarted, the network failed): the lock is gone, and
        /// another instance may hold it now.
        public var isLost: Bool { connection.isClosed }
    }

    /// Opens a connection for `settings` (within `timeout`) and runs `body` on it when this instance
    /// takes the lock `key`; nil at once when another instance holds it.
    public static func whileHolding<T: Sendable>(
        _ key: String, settings: DatabaseSettings, applicationName: String, timeout: Duration, logger: Logger,
        _ body: @Sendable (Lease) async throws -> T
    ) async throws -> T? {
        let connection = try await Database.connect(settings, applicationName: applicationName, within: timeout, logger: logger)
        do {
            let leading = try await withDeadline(timeout, abandonWhen: { connection.isClosed }) {
                let rows = try await connection.query("SELECT pg_try_advisory_lock(hashtextextended(\(key), 0))", logger: logger)
                for try await acquired in rows.decode(Bool.self) { return acquired }
                return false
            }
            let result = leading ? try await body(Lease(connection: connection)) : nil
            try? await connection.close()
            return result
        } catch {
            try? await connection.close()
            throw error
        }
    }
}
