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
            }
        }
        return PostgresQuery(unsafeSQL: text, binds: binds)
    }
}

extension PostgresConnection {
    /// Runs a composed statement (``SQL``).
    @discardableResult
    public func query(_ sql: SQL, logger: Logger) async throws -> PostgresRowSequence {
        try await query(try sql.query(), logger: logger)
    }
}
