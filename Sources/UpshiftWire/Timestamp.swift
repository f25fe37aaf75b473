import Foundation

/// RFC 3339 timestamps, parsed and written by hand: they are on every event, and Foundation's
/// formatters are slow and not safe to share across tasks on every platform.
public enum Timestamp {
    /// The first and last millisecond ``format`` can write: years 0000 to 9999 in UTC.
    public static let earliestMillisecond = daysFromCivil(year: 0, month: 1, day: 1) * 86_400_000
    public static let latestMillisecond = daysFromCivil(year: 10_000, month: 1, day: 1) * 86_400_000 - 1

    /// Parses `2026-04-01T12:30:00Z`, `2026-04-01T12:30:00.123+02:00` (RFC 3339 §5.6, `t`/`z` accepted).
    /// The instant, in UTC and to the millisecond ``format`` writes, must lie in years 0000 to 9999:
    /// `9999-12-31T23:59:59-00:01` is a minute into year 10000, which no timestamp of this API can
    /// spell, so it is nil like any other text that is not a timestamp.
    public static func parse(_ text: String) -> Date? {
        var bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        func number(_ start: Int, _ length: Int) -> Int? {
            var value = 0
            for index in start..<(start + length) {
                let byte = bytes[index]
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        if bytes[10] == UInt8(ascii: "t") { bytes[10] = UInt8(ascii: "T") }
        guard bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-"), bytes[10] == UInt8(ascii: "T"),
            bytes[13] == UInt8(ascii: ":"), bytes[16] == UInt8(ascii: ":"),
            let year = number(0, 4), let month = number(5, 2), let day = number(8, 2),
            let hour = number(11, 2), let minute = number(14, 2), let second = number(17, 2),
            (1...12).contains(month), day >= 1, day <= daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var index = 19
        var fraction = 0.0
        if bytes[index] == UInt8(ascii: ".") {
            index += 1
            var scale = 0.1
            let start = index
            while index < bytes.count, bytes[index] >= 0x30, bytes[index] <= 0x39 {
                fraction += Double(bytes[index] - 0x30) * scale
                scale /= 10
                index += 1
            }
            guard index > start, index - start <= 9 else { return nil }
        }
        guard index < bytes.count else { return nil }
        var offsetSeconds = 0
        switch bytes[index] {
        case UInt8(ascii: "Z"), UInt8(ascii: "z"):
            guard index + 1 == bytes.count else { return nil }
        case UInt8(ascii: "+"), UInt8(ascii: "-"):
            guard index + 6 == bytes.count, bytes[index + 3] == UInt8(ascii: ":"),
                let hours = number(index + 1, 2), let minutes = number(index + 4, 2), hours <= 23, minutes <= 59
            else { return nil }
            offsetSeconds = (hours * 3600 + minutes * 60) * (bytes[index] == UInt8(ascii: "+") ? 1 : -1)
        default:
            return nil
        }
        let days = daysFromCivil(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + min(second, 59) - offsetSeconds
        let date = Date(timeIntervalSince1970: Double(seconds) + fraction)
        // Rounded as ``format`` rounds it: 9999-12-31T23:59:59.9996Z would be written as year 10000.
        let millisecond = Int((date.timeIntervalSince1970 * 1000).rounded())
        guard millisecond >= earliestMillisecond, millisecond <= latestMillisecond else { return nil }
        return date
    }

    /// Writes `date` as `2026-04-01T12:30:00.123Z` (UTC, milliseconds).
    public static func format(_ date: Date) -> String {
        // To the nearest millisecond: a time read back from PostgreSQL can sit a hair below the one written.
        let totalMillis = Int((date.timeIntervalSince1970 * 1000).rounded())
        let millis = ((totalMillis % 1000) + 1000) % 1000
        let totalSeconds = (totalMillis - millis) / 1000
        let secondsOfDay = ((totalSeconds % 86_400) + 86_400) % 86_400
        let days = (totalSeconds - secondsOfDay) / 86_400
        let (year, month, day) = civilFromDays(days)
        func pad(_ value: Int, _ width: Int) -> String {
            let text = String(value)
            return String(repeating: "0", count: max(0, width - text.count)) + text
        }
        return "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T\(pad(secondsOfDay / 3600, 2)):"
            + "\(pad(secondsOfDay / 60 % 60, 2)):\(pad(secondsOfDay % 60, 2)).\(pad(millis, 3))Z"
    }

    /// `yyyy-MM-dd'T'HH:mm:ss'Z'`: to the second, without a fraction (Apple's lookup API writes dates so,
    /// and Siren's parser fails on a fraction).
    public static func formatSeconds(_ date: Date) -> String {
        String(format(date).prefix(19)) + "Z"
    }

    /// The UTC day (`yyyy-mm-dd`) of `date`.
    public static func day(_ date: Date) -> String {
        String(format(date).prefix(10))
    }

    public static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    // Howard Hinnant's days_from_civil / civil_from_days (proleptic Gregorian, days since 1970-01-01).
    public static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    public static func civilFromDays(_ days: Int) -> (Int, Int, Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let mp = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }
}

extension Date {
    /// Whole microseconds since 1970 (PostgreSQL's precision), rounded to the nearest.
    public var microseconds: Int64 { Int64((timeIntervalSince1970 * 1_000_000).rounded()) }

    /// This time to the nearest microsecond, placed half a microsecond up: PostgresNIO truncates a
    /// `Date` to microseconds, and a `Double` near 1.7e9 seconds is only exact to about 0.2 µs, so an
    /// exact microsecond can arrive one below. Bind this, and the stored microsecond is the nearest one.
    public var forPostgres: Date {
        // PostgresNIO truncates toward zero from 2000-01-01: go half a microsecond away from zero.
        let nudge = timeIntervalSince1970 < 946_684_800 ? -0.5 : 0.5
        return Date(timeIntervalSince1970: (Double(microseconds) + nudge) / 1_000_000)
    }
}
