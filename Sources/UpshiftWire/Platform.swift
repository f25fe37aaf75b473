/// The platform an app runs on: `ios`, `android`, `macos`, … — a lowercase letter, then lowercase letters,
/// digits, `_` or `-`, at most 32 bytes in all. A value of this type has passed that rule, so no code that
/// receives one checks it again. The server turns a request's text into one with Core's `init(_:field:)`,
/// whose error is the one every route, form and command answers for a bad platform.
public struct Platform: CheckedName {
    public let rawValue: String

    /// The platform `text` names, or nil.
    public init?(validating text: String) {
        guard Self.isValid(text) else { return nil }
        rawValue = text
    }

    /// What a platform must be, as its errors say it.
    public static let rule = "a platform is a lowercase letter, then lowercase letters, digits, _ or -, at most 32 in all"

    public static let maximumLength = 32

    /// What is wrong with `text` as a platform, as every error for it says: a name that breaks the rule
    /// only by its capitals (`iOS`) is told its lowercase spelling, any other the rule.
    /// Only ASCII capitals count (the Kelvin sign is no `K`), and a name too long is not lowercased at all.
    public static func problem(with text: String) -> String {
        guard text.utf8.count <= maximumLength else { return rule }
        let lowercase = String(decoding: text.utf8.map { $0 >= 0x41 && $0 <= 0x5A ? $0 + 0x20 : $0 }, as: UTF8.self)
        return isValid(lowercase) ? "a platform is lowercase, for example \(lowercase)" : rule
    }

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
}
