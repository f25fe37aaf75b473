/// What free text the API accepts (app names, reasons, release notes, store ids, dashboard fields), and
/// how it is measured: in Unicode scalars, as JSON Schema's `maxLength` counts, never in grapheme
/// clusters (a `"` followed by a thousand combining marks is one `Character` but 1,001 scalars).
public enum TextRules {
    /// Why `text` is refused, or nil: C0 control characters (tab, line feed and carriage return only
    /// where `lineBreaks` allows them) and the noncharacters U+FFFE and U+FFFF. PostgreSQL cannot store
    /// NUL, and none of these belongs in a name, a note or a reason.
    public static func violation(in text: String, lineBreaks: Bool) -> String? {
        for scalar in text.unicodeScalars {
            switch scalar.value {
            case 0x09, 0x0A, 0x0D:
                if !lineBreaks { return "must not contain tabs or line breaks" }
            case 0x00..<0x20: return "must not contain control characters (U+\(hex(scalar.value)))"
            case 0xFFFE, 0xFFFF: return "must not contain the noncharacter U+\(hex(scalar.value))"
            default: continue
            }
        }
        return nil
    }

    /// The length the API's limits count: Unicode scalars.
    public static func length(_ text: String) -> Int {
        text.unicodeScalars.count
    }

    private static func hex(_ value: UInt32) -> String {
        let digits = String(value, radix: 16, uppercase: true)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}

extension TextRules {
    /// `text` as an integer in `range` when it is ASCII decimal digits and nothing else (no sign, no
    /// space; leading zeros are read as zeros), else nil; a value past `Int` is out of range, never a trap.
    public static func integer(_ text: some StringProtocol, in range: ClosedRange<Int>) -> Int? {
        guard !text.isEmpty else { return nil }
        var value = 0
        for byte in text.utf8 {
            guard byte >= 0x30, byte <= 0x39 else { return nil }
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(Int(byte - 0x30))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        return range.contains(value) ? value : nil
    }
}
