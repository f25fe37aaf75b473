import Foundation

/// Number and time formats of the summaries, as C's printf writes them (the tables published in
/// docs/BENCHMARKS.md were printed with printf, so rounding must be printf's too).
public enum Format {
    /// `value` with `digits` decimals: `fixed(0.6789, 2)` is "0.68".
    public static func fixed(_ value: Double, _ digits: Int) -> String {
        String(format: "%.\(digits)f", value)
    }

    /// `value` as `fixed` prints it, read back: figures computed from a printed figure agree with the table.
    public static func printed(_ value: Double, _ digits: Int) -> Double {
        Double(fixed(value, digits)) ?? value
    }

    /// A whole number with thousands separators: 10000011 is "10,000,011".
    public static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return value < 0 ? "-" + out : out
    }

    /// `value` rounded to a whole number, with thousands separators (printf's rounding).
    public static func grouped(_ value: Double) -> String {
        grouped(Int(fixed(value, 0)) ?? 0)
    }

    /// A share of 1 as a whole percentage: 0.874 is "87%".
    public static func percent(_ share: Double) -> String {
        fixed(100 * share, 0) + "%"
    }

    private static func formatter(_ pattern: String) -> DateFormatter {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = pattern
        return formatter
    }

    /// "2026-11-24 16:49:32 UTC": when a run started.
    public static func utcStamp(_ date: Date) -> String {
        formatter("yyyy-MM-dd HH:mm:ss").string(from: date) + " UTC"
    }

    /// "2026-11-24T16:49:32Z": the catalog's `--released-at`.
    public static func iso8601(_ date: Date) -> String {
        formatter("yyyy-MM-dd'T'HH:mm:ss'Z'").string(from: date)
    }

    /// "2026-11-24": a UTC day.
    public static func day(_ date: Date) -> String {
        formatter("yyyy-MM-dd").string(from: date)
    }

    /// "16:49:32": the clock of a progress line.
    public static func clock(_ date: Date) -> String {
        formatter("HH:mm:ss").string(from: date)
    }

    /// "20261124-164932": the name of a run's output folder.
    public static func folderStamp(_ date: Date) -> String {
        formatter("yyyyMMdd-HHmmss").string(from: date)
    }
}
