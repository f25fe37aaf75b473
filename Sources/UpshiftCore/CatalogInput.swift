import Foundation

/// Validates admin request bodies (apps, releases, release edits, policies) into catalog values.
/// Unknown fields are errors: a misspelt `minimumVerison` must not be silently ignored.
public enum CatalogInput {
    /// Limits on free text, so that one catalog entry cannot bloat every check response. Lengths count
    /// Unicode scalars (``TextRules``).
    public static let maximumNoteLines = 50
    public static let maximumNoteLength = 1_000
    public static let maximumNameLength = 200
    public static let maximumURLLength = 2_000
    public static let maximumReasonLength = 1_000
    /// Decimal fields take exactly the decimals they can act on, never a value rounded to one: a rollout
    /// in hundredths of a percent (one of the 10,000 buckets), days in thousandths (86.4 s).
    public static let rolloutPercentPlaces = 2
    public static let dayPlaces = 3

    /// The optional `reason` of any write (line breaks allowed).
    public static func reason(_ body: JSONValue) throws(FieldError) -> String? {
        guard let value = body["reason"], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw FieldError("reason", "must be a string") }
        try checkText(text, field: "reason", maximumLength: maximumReasonLength, lineBreaks: true, allowEmpty: true)
        return text
    }

    /// Free text: no control characters (line breaks only where allowed), at most `maximumLength` scalars.
    public static func checkText(
        _ text: String, field: String, maximumLength: Int, lineBreaks: Bool, allowEmpty: Bool = false
    ) throws(FieldError) {
        guard allowEmpty || !text.isEmpty else { throw FieldError(field, "must not be empty") }
        guard TextRules.length(text) <= maximumLength else {
            throw FieldError(field, "at most \(maximumLength) characters (Unicode scalars)")
        }
        if let violation = TextRules.violation(in: text, lineBreaks: lineBreaks) { throw FieldError(field, violation) }
    }

    static let maximumStoreIdLength = 200
    /// 1 TiB: larger than any app, small enough for every client's integer.
    public static let maximumDownloadLength = 1 << 40
    static let downloadURLRule = "must be an absolute http(s) URL with a host, in printable ASCII"

    /// An absolute http(s) URL (``isURL`` without the store schemes): Sparkle downloads it.
    public static func isDownloadURL(_ text: String) -> Bool {
        (text.hasPrefix("https://") || text.hasPrefix("http://")) && isURL(text)
    }

    /// Strict base64 (standard alphabet, padded, nothing else) of exactly 64 bytes: decoding and encoding
    /// again gives the same text, so no other spelling of those bytes passes.
    public static func isEdSignature(_ text: String) -> Bool {
        guard text.utf8.count == 88, let bytes = Data(base64Encoded: text), bytes.count == 64 else { return false }
        return bytes.base64EncodedString() == text
    }
    static let urlRule = "must be an http(s) URL with a host, or an itms-apps: or market: URL, in printable ASCII"

    /// `^(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][!-~]*)?|(itms-apps|market):[!-~]+)$`, at most
    /// 2,000 characters: the URL is handed to apps as it is, so only its shape is checked, exactly as
    /// docs/openapi.yaml states it.
    public static func isURL(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumURLLength else { return false }
        func printable(_ slice: ArraySlice<UInt8>) -> Bool { slice.allSatisfy { $0 >= 0x21 && $0 <= 0x7E } }
        for scheme in ["itms-apps:", "market:"] where bytes.starts(with: scheme.utf8) {
            let rest = bytes.dropFirst(scheme.utf8.count)
            return !rest.isEmpty && printable(rest)
        }
        var rest: ArraySlice<UInt8>
        if bytes.starts(with: "https://".utf8) {
            rest = bytes.dropFirst(8)
        } else if bytes.starts(with: "http://".utf8) {
            rest = bytes.dropFirst(7)
        } else {
            return false
        }
        let host = rest.prefix { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        guard !host.isEmpty else { return false }
        rest = rest.dropFirst(host.count)
        if rest.first == UInt8(ascii: ":") {
            let port = rest.dropFirst().prefix { $0 >= 0x30 && $0 <= 0x39 }
            guard (1...5).contains(port.count) else { return false }
            rest = rest.dropFirst(1 + port.count)
        }
        guard let first = rest.first else { return true }
        return (first == UInt8(ascii: "/") || first == UInt8(ascii: "?") || first == UInt8(ascii: "#")) && printable(rest)
    }
}
