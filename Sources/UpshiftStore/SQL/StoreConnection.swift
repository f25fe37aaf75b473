import Logging
import NIOCore
import PostgresNIO

/// A connection of the store, with the only statement paths the store uses: a composed statement
/// (``query(_:logger:file:line:)``), a prepared one (``rows(prepared:logger:)``), a transaction of
/// either (``transaction(logger:_:)``) and a bulk copy (``copy(into:columns:rows:logger:)``).
/// PostgresNIO's own `query`, `execute`, `withTransaction` and `copyFrom` are not reachable through it,
/// so the compiler holds every statement to these paths: they are the ones that fail, rather than hang
/// or stop the process, when PostgreSQL closes the connection under them (docs/ARCHITECTURE.md,
/// "Reading rows").
///
/// A pool lends one to its caller (``DatabasePool/withConnection(_:)``); ``Database/connect(_:applicationName:within:logger:)``
/// opens one outside any pool, for a session that must outlive a statement (a leader's lock).
public struct StoreConnection: Sendable {
    private let base: PostgresConnection
    /// Counts each statement while it waits for its answer, on a leader's connection (nil elsewhere).
    private let answers: AwaitedAnswers?

    init(_ base: PostgresConnection, answers: AwaitedAnswers? = nil) {
        self.base = base
        self.answers = answers
    }

    /// The same connection, its statements counted by `answers` while they wait for their answer.
    func watched(by answers: AwaitedAnswers) -> StoreConnection { StoreConnection(base, answers: answers) }

    private func awaitingAnswer<T>(_ body: () async throws -> T) async throws -> T {
        guard let answers else { return try await body() }
        return try await answers.waiting(body)
    }

    /// Whether the connection has closed (PostgreSQL ended the session, the network dropped it, or it
    /// was closed here).
    public var isClosed: Bool { base.isClosed }

    /// Closes the connection; a lock it held is released by PostgreSQL as the session ends.
    public func close() async throws { try await base.close() }

    /// Runs a composed statement (``SQL``) and reads all its rows, on the connection's event loop, asking
    /// for each next part as it comes. Every statement of the store goes through here or
    /// ``rows(prepared:logger:)``, rather than PostgresNIO's async `query`, for two faults of PostgresNIO
    /// 1.33.2 when PostgreSQL closes a connection (a restart, a failover, `pg_terminate_backend`;
    /// `ConnectionLossTests`):
    ///
    /// - its async row sequence stops reading the socket while its reader is behind, and if the
    ///   connection closes then, NIO still delivers the socket's last bytes and a read-complete, which
    ///   the row stream meets with a `preconditionFailure` that ends the process;
    /// - a statement written to a connection that has closed is dropped with its promise (the channel
    ///   fails the write, and PostgresNIO writes without a promise), so its caller waits for ever.
    ///   Here the statement is written on the event loop in the same turn that finds the connection
    ///   open; a closed one fails the statement at once with ``ConnectionLost``.
    ///
    /// Results here are bounded by their statements (`LIMIT`, a batch, a report): reading one whole holds
    /// its rows as received until the caller is done with them, one batch or one report at a time.
    @discardableResult
    public func query(_ sql: SQL, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> Rows {
        let query = try sql.query()
        let (base, eventLoop) = (base, base.eventLoop)
        let result = eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            // On the loop, an open channel still has its handlers: the statement reaches PostgresNIO's
            // state machine, which fails it properly if the connection closes later.
            guard !base.isClosed else { return eventLoop.makeFailedFuture(ConnectionLost()) }
            return base.query(query, logger: logger, file: file, line: line)
        }
        return Rows(try await awaitingAnswer { try await result.get().rows })
    }

    /// Runs a prepared statement (PostgreSQL plans it once per connection) and reads all its rows, for the
    /// same fault as ``query(_:logger:file:line:)``: PostgresNIO writes it without a promise, so one
    /// written after the connection closed would leave its caller waiting for ever. PostgresNIO has no
    /// future for prepared statements, so the task runs here on the connection's event loop: the check
    /// that the connection is open and PostgresNIO's write of the statement happen in one turn of the
    /// loop, with no suspension between them. Its rows come through PostgresNIO's async sequence: keep the
    /// answer to one row (as the writer's insert does), which arrives with its completion.
    public func rows<Statement: PostgresPreparedStatement>(
        prepared statement: Statement, logger: Logger
    ) async throws -> [Statement.Row] {
        let base = base
        return try await awaitingAnswer {
            try await withTaskExecutorPreference(EventLoopTaskExecutor(base.eventLoop)) {
                guard !base.isClosed else { throw ConnectionLost() }
                var rows: [Statement.Row] = []
                for try await row in try await base.execute(statement, logger: logger) { rows.append(row) }
                return rows
            }
        }
    }

    /// Runs `body` in one transaction: `BEGIN`, then `COMMIT` when `body` returns, `ROLLBACK` when it
    /// throws, every statement through ``query(_:logger:file:line:)`` (PostgresNIO's `withTransaction`
    /// sends them through its async `query`, which waits for ever on a connection that closed). What
    /// `body` throws is rethrown as itself, and so is the error of a `BEGIN` or `COMMIT` that failed: a
    /// connection that closed under either is then a connection error like any other (`503`, not
    /// `500`). A connection whose `ROLLBACK` failed is closed: it may still be inside the transaction,
    /// and its pool must not lend it out again.
    public func transaction<T: Sendable>(
        logger: Logger, _ body: (StoreConnection) async throws -> T
    ) async throws -> T {
        try await query("BEGIN", logger: logger)
        let value: T
        do {
            value = try await body(self)
        } catch {
            do { try await query("ROLLBACK", logger: logger) } catch { try? await close() }
            throw error
        }
        try await query("COMMIT", logger: logger)
        return value
    }

    /// Copies `rows` into `columns` of `table` with `COPY … FROM STDIN`, the bulk path for imports: one
    /// statement, its rows streamed in parts of about 1 MiB, with no bind per field and no limit on
    /// their number. Inside a ``transaction(logger:_:)`` the rows commit with it; otherwise all of them
    /// or none. A row PostgreSQL cannot read (a field not of its column's type, a key already there)
    /// fails the copy with its error, and the connection stays usable.
    ///
    /// For the fault ``query(_:logger:file:line:)`` describes, the statement is written on the
    /// connection's event loop in the turn that finds the connection open (PostgresNIO writes a copy
    /// without a promise too): on a closed connection it fails at once with ``ConnectionLost``.
    public func copy(into table: SQLIdentifier, columns: [SQLIdentifier], rows: CopyRows, logger: Logger) async throws {
        precondition(columns.count == rows.width, "\(rows.width) fields a row copied into \(columns.count) columns")
        guard rows.count > 0 else { return }
        let (base, parts) = (base, rows.parts(of: 1 << 20))
        try await awaitingAnswer {
            try await withTaskExecutorPreference(EventLoopTaskExecutor(base.eventLoop)) {
                guard !base.isClosed else { throw ConnectionLost() }
                try await base.copyFrom(table: table.name, columns: columns.map(\.name), logger: logger) { writer in
                    for part in parts { try await writer.write(part) }
                }
            }
        }
    }
}
