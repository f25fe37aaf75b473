import Foundation
import Logging
import NIOCore
import NIOPosix
import PostgresNIO
import UpshiftCore

/// What the server and the CLI ask of PostgreSQL as a whole: whether an error means it could not be
/// reached, and, when it cannot be, why (``diagnose(_:logger:)``).
public enum Database {
    /// Whether `error` means the database could not be reached or could not answer in time (rather
    /// than refused a statement).
    public static func isConnectionError(_ error: any Error) -> Bool {
        if let error = error as? PSQLError { return error.code == .connectionError || error.code == .serverClosedConnection || error.code == .clientClosedConnection }
        return error is DeadlineExceeded || error is ConnectionLost || error is DatabaseUnavailable
            || error is DatabaseUnreachable
    }

    /// What PostgreSQL said of a statement it refused (its message), or of a connection that failed (the
    /// failure's kind); nil for an error that did not come from PostgreSQL or its driver.
    public static func failure(_ error: any Error) -> String? {
        guard let error = error as? PSQLError else { return nil }
        return error.serverInfo?[.message] ?? String(describing: error.code)
    }

    /// Opens one connection outside any pool and closes it: nil when that works, else why not
    /// (refused, timed out, authentication, unknown database…), naming the host and port. A pool
    /// hides the cause behind its circuit breaker; this is how the CLI and `serve`'s start-up say it.
    public static func diagnose(_ settings: DatabaseSettings, logger: Logger) async -> DatabaseUnreachable? {
        do {
            let connection = try await connect(settings, applicationName: "upshift-probe", within: settings.sessionTimeout, logger: logger)
            try? await connection.close()
            return nil
        } catch {
            return DatabaseUnreachable(settings, error: error)
        }
    }

    /// Opens one connection outside any pool within `limit` (``DeadlineExceeded`` after it). A connection
    /// that opens once its caller has stopped waiting (the deadline passed, or the caller was cancelled)
    /// is closed, never dropped: dropped, it would keep a session of PostgreSQL open, and PostgresNIO
    /// stops a debug build that lets a connection go unclosed.
    public static func connect(
        _ settings: DatabaseSettings, applicationName: String, within limit: Duration, logger: Logger
    ) async throws -> StoreConnection {
        let configuration = try settings.connectionConfiguration(applicationName: applicationName)
        let handoff = Handoff<PostgresConnection>()
        do {
            return try await withDeadline(limit) {
                // In a task of its own, which the deadline does not cancel: PostgresNIO's connect, cancelled
                // while its handshake runs, closes the channel without waiting and lets go of the connection
                // while the channel is still open, which stops a debug build (`PostgresConnection.deinit`
                // asserts it was closed; PostgresNIO 1.33.2's ConnectCancelHandler, from
                // https://github.com/vapor/postgres-nio/pull/647). A connection that opens after the deadline
                // goes back through the handoff and is closed.
                let connect = Task { try await PostgresConnection.connect(configuration: configuration, id: 0, logger: logger) }
                let connection = try await connect.value
                guard handoff.offer(connection) else {
                    try? await connection.close()
                    throw CancellationError()
                }
                return StoreConnection(connection)
            }
        } catch {
            if let late = handoff.abandon() { try? await late.close() }
            throw error
        }
    }
}

/// Where a value made under a deadline (a connection) passes to its caller: whichever of the two comes
/// second (the value, or the caller giving up) sees the other, so a value that comes late is always
/// cleaned up by one of them, whatever the order.
final class Handoff<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var opened: Value?
    private var abandoned = false

    /// Keeps `value` for the caller; false when the caller gave up already (the maker cleans it up).
    func offer(_ value: Value) -> Bool {
        lock.withLock {
            if abandoned { return false }
            opened = value
            return true
        }
    }

    /// The caller gives up: the value offered meanwhile, if one was (the caller cleans it up).
    func abandon() -> Value? {
        lock.withLock {
            abandoned = true
            defer { opened = nil }
            return opened
        }
    }
}

/// PostgreSQL could not be connected to, and why, with where it was looked for.
public struct DatabaseUnreachable: Error, CustomStringConvertible, Sendable {
    public enum Cause: Sendable, Equatable, CustomStringConvertible {
        case refused
        case timedOut
        case unknownHost
        case authentication(String)
        case unknownDatabase(String)
        case other(String)

        public var description: String {
            switch self {
            case .refused: "connection refused (is PostgreSQL running, on this port?)"
            case .timedOut: "the connection timed out"
            case .unknownHost: "the host name does not resolve"
            case .authentication(let message): "authentication failed: \(message)"
            case .unknownDatabase(let message): "unknown database: \(message)"
            case .other(let message): message
            }
        }
    }

    public let host: String
    public let port: Int
    public let database: String
    public let username: String
    public let cause: Cause

    init(_ settings: DatabaseSettings, error: any Error) {
        host = settings.host
        port = settings.port
        database = settings.database
        username = settings.username
        cause = Self.cause(of: error)
    }

    public var description: String {
        "cannot connect to PostgreSQL at \(host):\(port) (database \(database), user \(username)): \(cause)"
    }

    /// Why a connection or a statement failed, in words: PSQLError's own description names no cause.
    public static func cause(of error: any Error) -> Cause {
        switch error {
        case is DeadlineExceeded:
            return .timedOut
        case let error as PSQLError:
            if let state = error.serverInfo?[.sqlState] {
                let message = error.serverInfo?[.message] ?? state
                switch state {
                case "28P01", "28000": return .authentication(message)
                case "3D000": return .unknownDatabase(message)
                default: return .other(message)
                }
            }
            if let underlying = error.underlying { return cause(of: underlying) }
            if error.code == .serverClosedConnection {
                return .other("the connection closed before PostgreSQL answered (a network that cannot be reached, or not PostgreSQL)")
            }
            return .other(String(describing: error.code))
        case let error as NIOConnectionError:
            if let failure = error.connectionErrors.first { return cause(of: failure.error) }
            if error.dnsAError != nil || error.dnsAAAAError != nil { return .unknownHost }
            return .other(String(describing: error))
        case ChannelError.connectTimeout:
            return .timedOut
        case let error as IOError where error.errnoCode == ECONNREFUSED:
            return .refused
        case let error as IOError where error.errnoCode == ETIMEDOUT:
            return .timedOut
        case is SocketAddressError, is SocketAddressError.UnknownHost:
            return .unknownHost
        default:
            return .other(String(describing: error))
        }
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
/// ``ConnectionLost``). Either way the operation is cancelled and no longer waited for: a statement
/// that PostgreSQL never answers, or one sent through PostgresNIO's own API on a connection that
/// already closed (PostgresNIO 1.33 never completes it; ``StoreConnection/query(_:logger:file:line:)``
/// fails it at once), would keep a caller that waited for it waiting for ever. Cancelling the caller
/// cancels the operation.
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

extension Database {
    /// Runs `body` with a pool of two connections for `settings`, unbounded, for one command (the CLI,
    /// the simulation): the pool runs while `body` does and stops after it. A database that cannot be
    /// connected to fails at once with ``DatabaseUnreachable`` (where, and why).
    public static func withPool<T: Sendable>(
        _ settings: DatabaseSettings, logger: Logger,
        _ body: @escaping @Sendable (DatabasePool, Logger) async throws -> T
    ) async throws -> T {
        if let unreachable = await diagnose(settings, logger: logger) { throw unreachable }
        let client = PostgresClient(configuration: settings.clientConfiguration(maximumConnections: 2), backgroundLogger: logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            // The body starts once the client's task is about to call `run()`: a lease before `run()` waits
            // all the same, but PostgresNIO logs a warning for it, which CLI commands printed now and then.
            let (running, started) = AsyncStream<Void>.makeStream()
            group.addTask {
                started.finish()
                await client.run()
                return nil
            }
            defer { group.cancelAll() }
            for await _ in running {}
            return try await body(DatabasePool(client: client, logger: logger), logger)
        }
    }
}
