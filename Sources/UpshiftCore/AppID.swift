/// An app's identifier (docs/ARCHITECTURE.md, "What the catalog holds"): a lowercase letter or digit, then
/// lowercase letters, digits or `-`, at most 63 bytes in all. A value of this type has passed that rule, so
/// no code that receives one checks it again. The server turns a request's text into one at the edge: a body's
/// `id` with `init(_:field:)`, whose error is the one a bad id gets; a path's `{app}` that breaks the rule
/// names no app.
public struct AppID: CheckedName {
    public let rawValue: String

    /// The app id `text` is, or nil.
    public init?(validating text: String) {
        guard Self.isValid(text) else { return nil }
        rawValue = text
    }

    /// What an app id must be, as its errors say it.
    public static let rule = "must match ^[a-z0-9][a-z0-9-]{0,62}$"

    public static let maximumLength = 63

    /// Whether `text` is an app id.
    public static func isValid(_ text: String) -> Bool {
        var bytes = text.utf8.makeIterator()
        guard text.utf8.count <= maximumLength, let first = bytes.next(), isLowerAlnum(first) else { return false }
        while let byte = bytes.next() {
            guard isLowerAlnum(byte) || byte == 0x2D else { return false }
        }
        return true
    }

    private static func isLowerAlnum(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
    }
}

extension AppID {
    /// The app id `text` is, or the field error `field` gets for it.
    public init(_ text: String, field: String = "id") throws(FieldError) {
        guard let app = AppID(validating: text) else { throw FieldError(field, Self.rule) }
        self = app
    }
}
