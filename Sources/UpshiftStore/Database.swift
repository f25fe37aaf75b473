import Logging
import PostgresNIO

/// The connection pool of one PostgreSQL database, and what the server asks of it as a whole.
public final class Database: Sendable {
    public let client: PostgresClient
    let logger: Logger

    public init(settings: DatabaseSettings, maximumConnections: Int, logger: Logger) {
        self.client = PostgresClient(
            configuration: settings.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        self.logger = logger
    }

    /// Runs the pool until the task is cancelled or the service group shuts down.
    public func run() async {
        await client.run()
    }

    /// Whether PostgreSQL answers `SELECT 1` within `limit`.
    public func isReachable(within limit: Duration = .seconds(2)) async -> Bool {
        do {
            return try await withDeadline(limit) { [client, logger] in
                for try await _ in try await client.query("SELECT 1", logger: logger) {}
                return true
            }
        } catch {
            return false
        }
    }

    /// Whether `error` means the database could not be reached (rather than refused a statement).
    public static func isConnectionError(_ error: any Error) -> Bool {
        if let error = error as? PSQLError { return error.code == .connectionError || error.code == .serverClosedConnection || error.code == .clientClosedConnection }
        return error is DeadlineExceeded
    }
}

/// Thrown by ``withDeadline(_:_:)`` when the operation took longer than allowed.
public struct DeadlineExceeded: Error {
    public init() {}
}

/// Runs `operation`, cancelling it and throwing ``DeadlineExceeded`` when it takes longer than `limit`.
public func withDeadline<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T)
    async throws -> T
{
    try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask { try await operation() }
        group.addTask {
            try await Task.sleep(for: limit)
            return nil
        }
        defer { group.cancelAll() }
        guard let first = try await group.next(), let value = first else { throw DeadlineExceeded() }
        return value
    }
}
