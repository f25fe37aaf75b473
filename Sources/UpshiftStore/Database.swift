import Logging
import PostgresNIO
import UpshiftCore

/// The connection pool of one PostgreSQL database, and what the server asks of it as a whole. The pool
/// (`client`, a `PostgresClient`) is a service of the application's group itself.
public final class Database: Sendable {
    public let client: PostgresClient
    let logger: Logger

    public init(settings: DatabaseSettings, maximumConnections: Int, logger: Logger) {
        self.client = PostgresClient(
            configuration: settings.clientConfiguration(maximumConnections: maximumConnections), backgroundLogger: logger)
        self.logger = logger
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
        return error is DeadlineExceeded || error is ConnectionLost
    }
}

/// Thrown by ``withDeadline(_:abandonWhen:_:)`` when the operation took longer than allowed.
public struct DeadlineExceeded: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the operation took longer than its time limit" }
}

/// Thrown when the connection an operation ran on closed under it (the server ended the session, or
/// the network dropped it); whether its last statement committed is unknown.
public struct ConnectionLost: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "the database connection closed during the operation" }
}

/// Runs `operation` and returns what it returns, unless it takes longer than `limit` (throws
/// ``DeadlineExceeded``) or `abandonWhen` turns true first (polled every 100 ms; throws
/// ``ConnectionLost``). Either way the operation is cancelled and no longer waited for: PostgresNIO
/// 1.33 never completes a statement sent on a connection that already closed, so a caller that
/// waited for it would wait for ever. Cancelling the caller cancels the operation.
public func withDeadline<T: Sendable>(
    _ limit: Duration?, abandonWhen lost: (@Sendable () -> Bool)? = nil,
    _ operation: @escaping @Sendable () async throws -> T
) async throws -> T {
    try await race(
        operation,
        against: {
            let deadline = limit.map { ContinuousClock.now.advanced(by: $0) }
            while deadline.map({ ContinuousClock.now < $0 }) ?? true {
                if lost?() == true { throw ConnectionLost() }
                let pause = Duration.milliseconds(lost == nil ? 60_000 : 100)
                try await Task.sleep(for: deadline.map { min(pause, $0 - ContinuousClock.now) } ?? pause)
            }
            throw DeadlineExceeded()
        })
}

extension PostgresClient {
    /// `withConnection`, except that `body` fails with ``ConnectionLost`` as soon as the connection
    /// closes under it (the server ended the session or the network dropped it) instead of waiting
    /// for ever for a statement PostgresNIO sent after the close.
    public func withLiveConnection<T: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in
            guard !connection.isClosed else { throw ConnectionLost() }
            return try await withDeadline(nil, abandonWhen: { connection.isClosed }) { try await body(connection) }
        }
    }

    /// One transaction on a live connection (``withLiveConnection(_:)``); what `body` throws is
    /// rethrown as itself.
    public func transaction<T: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> T
    ) async throws -> T {
        try await withLiveConnection { connection in try await connection.transaction(logger: logger, body) }
    }
}

extension PostgresConnection {
    /// `withTransaction`, rethrowing what `body` threw as itself rather than wrapped in a
    /// `PostgresTransactionError` (callers want their own errors back).
    public func transaction<T: Sendable>(
        logger: Logger, _ body: (PostgresConnection) async throws -> T
    ) async throws -> T {
        do {
            return try await withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PostgresTransactionError {
            if let inner = error.closureError { throw inner }
            throw error
        }
    }
}

extension Database {
    /// Runs `body` with a client of two connections for `settings`, for one command (the CLI, the
    /// simulation): the client runs while `body` does and stops after it.
    public static func withClient<T: Sendable>(
        _ settings: DatabaseSettings, logger: Logger,
        _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T
    ) async throws -> T {
        let client = PostgresClient(configuration: settings.clientConfiguration(maximumConnections: 2), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(client, logger)
        }
    }
}
