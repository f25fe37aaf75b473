/// A name that has passed its rule where it entered (`Platform` here, Core's `AppID`), so that no code that
/// receives one checks it again. Each type states its rule (`init?(validating:)`, `rule`); this extension gives
/// them the rest alike: the text as its description and its order, a literal in code (one that breaks the rule
/// is a programming error), JSON as its text (decoding text that breaks the rule fails), and dictionaries keyed
/// by it as JSON objects. UpshiftStore binds and reads them as text.
public protocol CheckedName: Hashable, Comparable, Sendable, CustomStringConvertible, Codable, CodingKeyRepresentable,
    ExpressibleByStringLiteral
{
    var rawValue: String { get }
    /// The name `text` is, or nil.
    init?(validating text: String)
    /// What the name must be, as its errors say it.
    static var rule: String { get }
}

extension CheckedName {
    public var description: String { rawValue }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }

    public init(stringLiteral text: String) {
        guard let name = Self(validating: text) else { preconditionFailure("\(text) breaks the rule of \(Self.self)") }
        self = name
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let name = Self(validating: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: Self.rule))
        }
        self = name
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var codingKey: any CodingKey { CheckedNameKey(stringValue: rawValue) }

    public init?<T: CodingKey>(codingKey: T) {
        self.init(validating: codingKey.stringValue)
    }
}

private struct CheckedNameKey: CodingKey {
    let stringValue: String
    init(stringValue: String) { self.stringValue = stringValue }
    var intValue: Int? { nil }
    init?(intValue: Int) { nil }
}
