import PostgresNIO

/// A statement, or a part of one, composed of SQL text written in this code, names (``SQLIdentifier``)
/// and values. Every interpolated value is a bind, numbered when the statement is sent, so parts can be
/// written once and used in several statements (a condition, a CTE, an expression) without placeholders
/// numbered by hand or arrays of binds whose order must match them. A `String` interpolated is a value
/// like any other, never text: SQL text comes only from the literals of this code.
public struct SQL: Sendable, ExpressibleByStringInterpolation {
    fileprivate enum Part: Sendable {
        case text(String)
        case bind(any PostgresThrowingDynamicTypeEncodable & Sendable)
        case null
    }

    fileprivate var parts: [Part]

    public init(stringLiteral value: StaticString) {
        parts = [.text(value.description)]
    }

    public init(stringInterpolation: StringInterpolation) {
        parts = stringInterpolation.parts
    }

    public struct StringInterpolation: StringInterpolationProtocol {
        fileprivate var parts: [Part] = []

        public init(literalCapacity: Int, interpolationCount: Int) {}

        public mutating func appendLiteral(_ literal: StaticString) {
            parts.append(.text(literal.description))
        }

        /// Another part, in place.
        public mutating func appendInterpolation(_ sql: SQL) {
            parts.append(contentsOf: sql.parts)
        }

        /// A name of the schema, quoted.
        public mutating func appendInterpolation(_ identifier: SQLIdentifier) {
            parts.append(.text(identifier.quoted))
        }

        /// A value: a bind.
        public mutating func appendInterpolation(_ value: some PostgresThrowingDynamicTypeEncodable & Sendable) {
            parts.append(.bind(value))
        }

        /// A value that may be absent: a bind, `NULL` when nil.
        public mutating func appendInterpolation<Value: PostgresThrowingDynamicTypeEncodable & Sendable>(_ value: Value?) {
            parts.append(value.map { .bind($0) } ?? .null)
        }
    }

    /// `parts` joined by `separator` (`", "`, `" AND "`).
    public static func joined(_ parts: [SQL], separator: StaticString) -> SQL {
        var joined = SQL(stringLiteral: "")
        for (index, part) in parts.enumerated() {
            if index > 0 { joined.parts.append(.text(separator.description)) }
            joined.parts.append(contentsOf: part.parts)
        }
        return joined
    }

    /// The statement as PostgresNIO sends it: the text with `$1`, `$2`, … in the order of the values.
    public func query() throws -> PostgresQuery {
        var text = ""
        var binds = PostgresBindings()
        for part in parts {
            switch part {
            case .text(let sql): text += sql
            case .bind(let value):
                try binds.append(value)
                text += "$\(binds.count)"
            case .null:
                binds.appendNull()
                text += "$\(binds.count)"
            }
        }
        return PostgresQuery(unsafeSQL: text, binds: binds)
    }
}

extension PostgresConnection {
    /// Runs a composed statement (``SQL``) and reads all its rows (``rows(_:logger:file:line:)``).
    @discardableResult
    public func query(_ sql: SQL, logger: Logger) async throws -> Rows {
        try await rows(try sql.query(), logger: logger)
    }

    /// Runs a statement and reads all its rows on the connection's event loop, asking for each next part
    /// as it comes. Every statement of the store goes through here (``SQL``, ``transaction(logger:_:)``)
    /// rather than PostgresNIO's async `query`, for two faults of PostgresNIO 1.33.2 when PostgreSQL
    /// closes a connection (a restart, a failover, `pg_terminate_backend`, `ConnectionLossTests`):
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
    public func rows(_ query: PostgresQuery, logger: Logger, file: String = #fileID, line: Int = #line) async throws -> Rows {
        let eventLoop = self.eventLoop
        let result = eventLoop.flatSubmit { () -> EventLoopFuture<PostgresQueryResult> in
            // On the loop, an open channel still has its handlers: the statement reaches PostgresNIO's
            // state machine, which fails it properly if the connection closes later.
            guard !self.isClosed else { return eventLoop.makeFailedFuture(ConnectionLost()) }
            return self.query(query, logger: logger, file: file, line: line)
        }
        return Rows(try await result.get().rows)
    }
}

extension PostgresConnection {
    /// Runs a prepared statement (PostgreSQL plans it once per connection) and reads all its rows, for the
    /// same fault as ``rows(_:logger:file:line:)``: PostgresNIO writes it without a promise, so one
    /// written after the connection closed would leave its caller waiting for ever. PostgresNIO has no
    /// future for prepared statements, so the task runs here on the connection's event loop: the check
    /// that the connection is open and PostgresNIO's write of the statement happen in one turn of the
    /// loop, with no suspension between them. Its rows come through PostgresNIO's async sequence: keep the
    /// answer to one row (as the writer's insert does), which arrives with its completion.
    public func rows<Statement: PostgresPreparedStatement>(
        prepared statement: Statement, logger: Logger
    ) async throws -> [Statement.Row] {
        try await withTaskExecutorPreference(EventLoopTaskExecutor(eventLoop)) {
            guard !self.isClosed else { throw ConnectionLost() }
            var rows: [Statement.Row] = []
            for try await row in try await self.execute(statement, logger: logger) { rows.append(row) }
            return rows
        }
    }
}

/// Runs a task's jobs on a NIO event loop (``PostgresConnection/rows(prepared:logger:)``).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
