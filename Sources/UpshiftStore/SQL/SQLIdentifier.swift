import PostgresNIO

/// A name in the schema that code makes (a projection generation's table, its index): lowercase ASCII
/// letters, digits and `_`, starting with a letter or `_`, at most 63 bytes, and written double-quoted.
/// The only way a name reaches SQL text; a name outside that shape is a programming error.
public struct SQLIdentifier: Sendable, Hashable, CustomStringConvertible {
    public let name: String

    public init(_ name: String) {
        precondition(Self.isValid(name), "not an SQL identifier: \(name)")
        self.name = name
    }

    /// `name` with `suffix` appended (`install_state_g3` → `install_state_g3_recent`).
    public func appending(_ suffix: String) -> SQLIdentifier {
        SQLIdentifier(name + suffix)
    }

    /// The name as SQL writes it: quoted, so that no name can be read as a keyword.
    public var quoted: String { "\"\(name)\"" }

    public var description: String { name }

    static func isValid(_ name: String) -> Bool {
        guard let first = name.utf8.first, name.utf8.count <= 63, first == UInt8(ascii: "_") || (first >= 0x61 && first <= 0x7A)
        else { return false }
        return name.utf8.allSatisfy { ($0 >= 0x61 && $0 <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: "_") }
    }
}

extension PostgresQuery.StringInterpolation {
    /// A name of the schema, quoted (``SQLIdentifier``): never a bind, never unchecked text.
    public mutating func appendInterpolation(_ identifier: SQLIdentifier) {
        appendInterpolation(unescaped: identifier.quoted)
    }
}
