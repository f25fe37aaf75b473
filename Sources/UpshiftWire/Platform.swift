/// The platform an app runs on: `ios`, `android`, `macos`, … — a lowercase letter, then lowercase letters,
/// digits, `_` or `-`, at most 32 bytes in all. A value of this type has passed that rule, so no code that
/// receives one checks it again. The server turns a request's text into one with Core's `init(_:field:)`,
/// whose error is the one every route, form and command answers for a bad platform.
public struct Platform: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let rawValue: String

    /// The platform `text` names, or nil.
    public init?(validating text: String) {
        guard Self.isValid(text) else { return nil }
        rawValue = text
    }

    /// What a platform must be, as its errors say it.
    public static let rule = "a platform is a lowercase letter, then lowercase letters, digits, _ or -, at most 32 in all"

    public static let maximumLength = 32

    /// Whether `text` is a platform name.
    public static func isValid(_ text: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        guard text.utf8.count <= maximumLength, let first = bytes.next(), first >= 0x61, first <= 0x7A else { return false }
        while let byte = bytes.next() {
            guard (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x5F || byte == 0x2D else {
                return false
            }
        }
        return true
    }

    public static let ios: Platform = "ios"
    public static let android: Platform = "android"
    public static let macos: Platform = "macos"

    public var description: String { rawValue }

    public static func < (lhs: Platform, rhs: Platform) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A platform written in code (`"ios"`); a literal that breaks the rule is a programming error.
extension Platform: ExpressibleByStringLiteral {
    public init(stringLiteral text: String) {
        guard let platform = Platform(validating: text) else { preconditionFailure("\(text) is not a platform name") }
        self = platform
    }
}

/// Encoded as its name; decoding one that breaks the rule fails.
extension Platform: Codable {
    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        guard let platform = Platform(validating: text) else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: Self.rule))
        }
        self = platform
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }
}

/// A dictionary keyed by platform encodes as a JSON object, as one keyed by its name does.
extension Platform: CodingKeyRepresentable {
    public var codingKey: any CodingKey { PlatformKey(stringValue: rawValue) }

    public init?<T: CodingKey>(codingKey: T) {
        self.init(validating: codingKey.stringValue)
    }

    private struct PlatformKey: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }
}
