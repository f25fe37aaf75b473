import Foundation

/// What an export of the event log writes (docs/OPERATIONS.md, "Export for a warehouse"): one row per
/// event, its columns named as the log's, each prefixed by the cursor just after it.
public enum EventExportFormat: String, Sendable, CaseIterable {
    /// One JSON object per line (`application/x-ndjson`), its members in the order of ``columns``.
    case ndjson
    /// RFC 4180 CSV with a header line (`text/csv`); `data` as JSON text, a missing value empty.
    case csv

    public var contentType: String {
        switch self {
        case .ndjson: "application/x-ndjson"
        case .csv: "text/csv; charset=utf-8"
        }
    }

    /// The columns of a row: `cursor` (resume after this row), then the log's own.
    public static let columns = [
        "cursor", "event_id", "occurred_at", "recorded_at", "app_id", "type", "install_id", "platform", "app_version",
        "stream_id", "stream_version", "data",
    ]
}

extension FeedPosition {
    /// The cursor of an export: `tx_id:position`, both decimal (`0:0` is before the first event).
    public var cursor: String { "\(transaction):\(position)" }

    /// The position of `cursor` (`tx_id:position`); nil unless it is two decimal numbers of at most 20 and
    /// 19 digits (`^[0-9]{1,20}:[0-9]{1,19}$`), with nothing else around them. A number past what the log
    /// can hold (`xid8`, `bigint`) reads as the largest, which is what it means: a `tx_id` past every
    /// transaction (an export answers that such a cursor is ahead of the log), a position past every event
    /// of its transaction.
    public init?(cursor: some StringProtocol) {
        let parts = cursor.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, zip(parts, [20, 19]).allSatisfy({ part, digits in
            !part.isEmpty && part.utf8.count <= digits && part.utf8.allSatisfy { (48...57).contains($0) }
        }) else { return nil }
        let (transaction, position) = (UInt64(parts[0]) ?? .max, Int64(parts[1]) ?? .max)
        self.init(transaction: transaction, position: position)
    }
}

/// A calendar month of the log (UTC), as the log's partitions divide it: `2026-09`.
public struct LogMonth: Sendable, Hashable, CustomStringConvertible {
    public let year: Int
    public let month: Int

    /// `YYYY-MM`, from 1970-01 to 9999-12; nil otherwise.
    public init?(_ text: some StringProtocol) {
        let parts = text.split(separator: "-", omittingEmptySubsequences: false)
        guard parts.count == 2, parts[0].utf8.count == 4, parts[1].utf8.count == 2,
            parts.allSatisfy({ $0.utf8.allSatisfy { (48...57).contains($0) } }),
            let year = Int(parts[0]), let month = Int(parts[1]), (1970...9999).contains(year), (1...12).contains(month)
        else { return nil }
        self.year = year
        self.month = month
    }

    public var description: String { String(format: "%04d-%02d", year, month) }

    /// The first instant of the month.
    public var start: Date { Self.first(year: year, month: month) }
    /// The first instant of the next month.
    public var end: Date { month == 12 ? Self.first(year: year + 1, month: 1) : Self.first(year: year, month: month + 1) }

    /// Whether no event of the month can arrive any more at `now`: ingestion takes events up to 30 days
    /// old, and a month is closed a day after its last instant passes that (as retention counts).
    public func isClosed(at now: Date) -> Bool { end <= Self.closedAfter(now) }

    /// The first instant at which the month is closed.
    public var closes: Date { end.addingTimeInterval(31 * 86_400) }

    static func closedAfter(_ now: Date) -> Date { now.addingTimeInterval(-31 * 86_400) }

    private static func first(year: Int, month: Int) -> Date {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        return calendar.date(from: DateComponents(year: year, month: month, day: 1))!
    }
}
