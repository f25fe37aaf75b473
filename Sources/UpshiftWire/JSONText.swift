/// JSON string escaping (RFC 8259 §7).
public enum JSONText {
    public static func quoted(_ string: String) -> String {
        var result = ""
        result.reserveCapacity(string.utf8.count + 2)
        appendQuoted(string, to: &result)
        return result
    }

    /// Appends `string` in quotes, escaped, to `text`. Only ASCII bytes are ever escaped, so a string
    /// without `"`, `\` or a control character (almost every one: ids, versions, codes) is copied whole.
    public static func appendQuoted(_ string: String, to text: inout String) {
        text.append("\"")
        guard string.utf8.contains(where: { $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") || $0 < 0x20 }) else {
            text.append(string)
            text.append("\"")
            return
        }
        for scalar in string.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                text += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: text.unicodeScalars.append(scalar)
            }
        }
        text.append("\"")
    }
}
