import Foundation

/// A UTC calendar day (every day of a report is one: docs/PROJECTIONS.md, "What the reports count"), as
/// a day number since 1970-01-01.
public struct UTCDay: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let number: Int

    public init(number: Int) { self.number = number }

    /// The day of `date`, at microsecond precision (a midnight read back from PostgreSQL can sit a
    /// hair before it).
    public init(_ date: Date) {
        let micros = date.microseconds
        let perDay: Int64 = 86_400_000_000
        number = Int(micros >= 0 ? micros / perDay : (micros - perDay + 1) / perDay)
    }

    /// Parses `YYYY-MM-DD`; nil for anything else (including impossible dates).
    public init?(_ text: some StringProtocol) {
        let bytes = Array(text.utf8)
        guard bytes.count == 10, bytes[4] == UInt8(ascii: "-"), bytes[7] == UInt8(ascii: "-") else { return nil }
        func number(_ range: Range<Int>) -> Int? {
            var value = 0
            for byte in bytes[range] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int(byte - 0x30)
            }
            return value
        }
        guard let year = number(0..<4), let month = number(5..<7), let day = number(8..<10),
            (1...12).contains(month), day >= 1, day <= Timestamp.daysInMonth(year: year, month: month)
        else { return nil }
        self.number = Timestamp.daysFromCivil(year: year, month: month, day: day)
    }

    /// Midnight UTC at the start of the day.
    public var start: Date { Date(timeIntervalSince1970: Double(number) * 86_400) }

    public var description: String {
        let (year, month, day) = Timestamp.civilFromDays(number)
        func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let yearText = String(year)
        return String(repeating: "0", count: max(0, 4 - yearText.count)) + yearText + "-" + two(month) + "-" + two(day)
    }

    public func adding(days: Int) -> UTCDay { UTCDay(number: number + days) }

    public static func < (lhs: UTCDay, rhs: UTCDay) -> Bool { lhs.number < rhs.number }
}
