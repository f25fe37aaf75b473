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

    /// A statement whose text is not a literal of this code and cannot be made of binds: a migration's
    /// statements, read from the files of `sql/`, and the few statements that take no parameters where
    /// the code puts a value it made itself (a cursor's row count, a snapshot's id).
    init(trustedText text: String) {
        parts = [.text(text)]
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

/// Runs a task's jobs on a NIO event loop (``StoreConnection/rows(prepared:logger:)``).
final class EventLoopTaskExecutor: TaskExecutor {
    let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
