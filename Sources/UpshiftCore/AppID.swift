/// App identifiers (docs/ARCHITECTURE.md, "What the catalog holds"): `^[a-z0-9][a-z0-9-]{0,62}$`.
public enum AppID {
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard let first = bytes.first, bytes.count <= 63, isLowerAlnum(first) else { return false }
        return bytes.allSatisfy { isLowerAlnum($0) || $0 == UInt8(ascii: "-") }
    }

    private static func isLowerAlnum(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39)
    }
}
