import Foundation
import Logging
import Metrics
import PostgresNIO
import UpshiftCore

/// One pool of connections for one kind of work (`hot`: ingestion, keys and sessions; `reads`: reports,
/// dashboard pages and the admin API; `projections`: the runner), so that one kind cannot starve
/// another, with the bounds of a request path: how long a caller waits for a connection, and how long
/// for the answer once it has one. A bound that passes, a statement the server cancelled for its
/// `statement_timeout`, and a pool that gave up (its circuit breaker tripped, or it shut down) all fail
/// with ``DatabaseUnavailable``, which the server answers `503` with `Retry-After`.
///
/// Statements go through ``query(_:logger:)`` (the rows are read before the connection goes back, so
/// that the answer bound covers them), ``transaction(logger:_:)`` and ``withConnection(_:)``.
public struct DatabasePool: Sendable {
    /// How long a caller waits for a connection and then for the answer; nil: unbounded (a command of
    /// the CLI, a test).
    public struct Bounds: Sendable, Equatable {
        public var wait: Duration
        public var answer: Duration

        public init(wait: Duration, answer: Duration) {
            self.wait = wait
            self.answer = answer
        }
    }

    public let name: String
    public let client: PostgresClient
    public let bounds: Bounds?
    public let logger: Logger
    let meters: PoolMeters?

    /// A pool of its own for `settings`, `connections` wide; `statementTimeout` is set on every
    /// connection (PostgreSQL cancels a statement that runs longer). The client is a service: run it.
    public init(
        name: String, settings: DatabaseSettings, connections: Int, bounds: Bounds?, statementTimeout: Duration? = nil,
        metrics: (any MetricsFactory)? = nil, logger: Logger
    ) {
        var configuration = settings.clientConfiguration(maximumConnections: connections, applicationName: "upshift-\(name)")
        if let statementTimeout {
            configuration.options.additionalStartupParameters.append(
                ("statement_timeout", "\(max(1, statementTimeout.milliseconds))ms"))
        }
        self.init(
            name: name, client: PostgresClient(configuration: configuration, backgroundLogger: logger), bounds: bounds,
            meters: metrics.map { PoolMeters(pool: name, connections: connections, factory: $0) }, logger: logger)
    }

    /// A pool over an existing client, unbounded: what the CLI and the tests hand to a store.
    public init(client: PostgresClient, logger: Logger) {
        self.init(name: "client", client: client, bounds: nil, meters: nil, logger: logger)
    }

    init(name: String, client: PostgresClient, bounds: Bounds?, meters: PoolMeters?, logger: Logger) {
        self.name = name
        self.client = client
        self.bounds = bounds
        self.meters = meters
        self.logger = logger
    }

    /// Runs `body` on a connection of the pool, within the pool's bounds; the connection goes back when
    /// `body` returns. A connection that closes under `body` fails it at once (``ConnectionLost``)
    /// rather than leaving it to wait for an answer that cannot come.
    public func withConnection<T: Sendable>(
        _ body: @escaping @Sendable (StoreConnection) async throws -> T
    ) async throws -> T {
        let lease = Lease()
        let (client, meters) = (client, meters)
        let requested = ContinuousClock.now
        do {
            return try await race(
                {
                    try await client.withConnection { connection in
                        lease.acquired(connection)
                        meters?.acquired(waited: ContinuousClock.now - requested)
                        defer { meters?.released() }
                        guard !connection.isClosed else { throw ConnectionLost() }
                        return try await body(StoreConnection(connection))
                    }
                },
                against: { try await lease.watch(requested: requested, bounds: bounds) })
        } catch {
            throw classify(error, lease: lease)
        }
    }

    /// One transaction (``withConnection(_:)``); what `body` throws is rethrown as itself.
    public func transaction<T: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (StoreConnection) async throws -> T
    ) async throws -> T {
        try await withConnection { connection in try await connection.transaction(logger: logger, body) }
    }

    /// Runs one composed statement (``SQL``) and reads all its rows.
    @discardableResult
    public func query(_ sql: SQL, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> Rows {
        try await withConnection { connection in
            try await connection.query(sql, logger: logger, file: file, line: line)
        }
    }

    /// What the caller is told: a bound that passed, a cancelled statement and a pool that cannot serve
    /// are ``DatabaseUnavailable``; anything else (a constraint, the caller's own error) is itself.
    private func classify(_ error: any Error, lease: Lease) -> any Error {
        let reason: DatabaseUnavailable.Reason
        switch error {
        case let error as DatabaseUnavailable:
            reason = error.reason
        case let error as PSQLError where error.serverInfo?[.sqlState] == PostgresError.Code.queryCanceled.raw:
            reason = .statementTimeout
        case let error as PSQLError
        where [PostgresError.Code.serializationFailure.raw, PostgresError.Code.deadlockDetected.raw]
            .contains(error.serverInfo?[.sqlState] ?? ""):
            // A replica cancels a read that holds back the changes it replays ("conflict with
            // recovery"), with the codes of a transaction that may succeed when retried.
            reason = .conflict
        case is ConnectionLost:
            reason = .connectionLost
        case _ where !lease.wasAcquired && !(error is CancellationError):
            // Failed before a connection was leased: the pool could not make one (PostgreSQL refused
            // or is away and the circuit breaker tripped) or it shut down.
            reason = .poolFailed(String(describing: error))
        case _ where Database.isConnectionError(error):
            reason = .connectionLost
        default:
            return error
        }
        meters?.unavailable(reason)
        return DatabaseUnavailable(pool: name, reason: reason)
    }
}

/// The database could not answer within a request's bounds; the request may be retried.
public struct DatabaseUnavailable: Error, CustomStringConvertible, Sendable {
    public enum Reason: Sendable, Equatable {
        /// No connection of the pool came free within the wait bound.
        case busy(Duration)
        /// The answer took longer than the answer bound (the connection was closed).
        case timedOut(Duration)
        /// PostgreSQL cancelled the statement for its `statement_timeout`.
        case statementTimeout
        /// The server cancelled the statement for a conflict: on a replica, with the recovery it
        /// replays (a report that held back a vacuum's changes for `max_standby_streaming_delay`);
        /// anywhere, a serialization failure or a deadlock. A retry may succeed.
        case conflict
        /// The connection closed during the statement.
        case connectionLost
        /// The pool could not lease a connection (cannot connect, circuit breaker tripped, shut down).
        case poolFailed(String)

        /// The label of the `upshift_db_pool_unavailable_total` counter.
        public var label: String {
            switch self {
            case .busy: "busy"
            case .timedOut: "timed_out"
            case .statementTimeout: "statement_timeout"
            case .conflict: "conflict"
            case .connectionLost: "connection_lost"
            case .poolFailed: "pool_failed"
            }
        }
    }

    public let pool: String
    public let reason: Reason

    public init(pool: String, reason: Reason) {
        self.pool = pool
        self.reason = reason
    }

    public var description: String {
        switch reason {
        case .busy(let wait): "every connection of the \(pool) pool is busy (waited \(wait))"
        case .timedOut(let answer): "the database did not answer within \(answer) (\(pool) pool)"
        case .statementTimeout: "the statement ran longer than its statement_timeout (\(pool) pool)"
        case .conflict: "the database cancelled the statement for a conflict, e.g. with a replica's recovery (\(pool) pool)"
        case .connectionLost: "the database connection closed during the statement (\(pool) pool)"
        case .poolFailed(let cause): "the \(pool) pool cannot reach the database: \(cause)"
        }
    }
}

/// The connection of one `withConnection`, once leased, watched against the pool's bounds.
private final class Lease: @unchecked Sendable {
    private let lock = NSLock()
    private var connection: PostgresConnection?
    private var leasedAt: ContinuousClock.Instant?

    func acquired(_ connection: PostgresConnection) {
        lock.withLock {
            self.connection = connection
            leasedAt = .now
        }
    }

    var wasAcquired: Bool { lock.withLock { leasedAt != nil } }

    private var state: (PostgresConnection?, ContinuousClock.Instant?) { lock.withLock { (connection, leasedAt) } }

    /// Throws when a bound passes or the leased connection closes; runs until cancelled otherwise.
    /// Polls every 100 ms: the connection's closing has no callback to wait on.
    func watch(requested: ContinuousClock.Instant, bounds: DatabasePool.Bounds?) async throws -> Never {
        while true {
            let (connection, leasedAt) = state
            let now = ContinuousClock.now
            if let connection, connection.isClosed { throw ConnectionLost() }
            if let bounds {
                if leasedAt == nil, now >= requested + bounds.wait {
                    throw DatabaseUnavailable(pool: "", reason: .busy(bounds.wait))
                }
                if let leasedAt, now >= leasedAt + bounds.answer {
                    // The statement may still run, or PostgreSQL may never answer: close the
                    // connection so that the pool replaces it rather than lending it out again.
                    if let connection { try? await connection.close() }
                    throw DatabaseUnavailable(pool: "", reason: .timedOut(bounds.answer))
                }
            }
            try await Task.sleep(for: .milliseconds(100))
        }
    }
}

extension Duration {
    /// Whole milliseconds, rounded down.
    var milliseconds: Int64 { components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// The rows of one statement, read in full while the connection was leased; iterated and decoded
/// as PostgresNIO's row sequence is (`for try await row in rows.decode((A, B).self)`).
public struct Rows: AsyncSequence, Sendable {
    public typealias Element = PostgresRow
    let rows: [PostgresRow]

    init(_ rows: [PostgresRow]) { self.rows = rows }

    public var count: Int { rows.count }

    public struct AsyncIterator: AsyncIteratorProtocol {
        var base: IndexingIterator<[PostgresRow]>
        public mutating func next() async -> PostgresRow? { base.next() }
    }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(base: rows.makeIterator()) }

    public func decode<Column: PostgresDecodable & Sendable>(_ type: Column.Type) -> AsyncThrowingMapSequence<Self, Column> {
        map { row in try row.decode(Column.self) }
    }

    public func decode<each Column: PostgresDecodable & Sendable>(
        _ columnType: (repeat each Column).Type
    ) -> AsyncThrowingMapSequence<Self, (repeat each Column)> {
        map { row in try row.decode(columnType, context: .default) }
    }
}

/// What a pool tells an operator, on the swift-metrics API: connections in use, how long callers
/// waited for one, and the calls it failed as ``DatabaseUnavailable``, by reason.
struct PoolMeters: Sendable {
    let pool: String
    let factory: any MetricsFactory
    let inUse: Meter
    let size: Meter
    let waits: Timer

    init(pool: String, connections: Int, factory: any MetricsFactory) {
        self.pool = pool
        self.factory = factory
        inUse = Meter(label: "upshift_db_pool_connections_in_use", dimensions: [("pool", pool)], factory: factory)
        size = Meter(label: "upshift_db_pool_connections", dimensions: [("pool", pool)], factory: factory)
        waits = Timer(label: "upshift_db_pool_wait_seconds", dimensions: [("pool", pool)], factory: factory)
        size.set(connections)
    }

    func acquired(waited: Duration) {
        inUse.increment()
        waits.recordNanoseconds(waited.components.seconds * 1_000_000_000 + waited.components.attoseconds / 1_000_000_000)
    }

    func released() { inUse.decrement() }

    func unavailable(_ reason: DatabaseUnavailable.Reason) {
        Counter(
            label: "upshift_db_pool_unavailable_total", dimensions: [("pool", pool), ("reason", reason.label)],
            factory: factory
        ).increment()
    }
}
