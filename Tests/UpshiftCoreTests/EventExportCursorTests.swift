import Foundation
import Testing
import UpshiftCore

/// What an export takes from a caller: a cursor `tx_id:position` and, for an archive, a month that can no
/// longer receive events.
@Suite struct EventExportCursorTests {
    @Test func aCursorIsTwoDecimalNumbersAndReadsBackAsItIsWritten() {
        for text in ["0:0", "1109172:4", "18446744073709551615:9223372036854775807", "0007:01"] {
            let position = FeedPosition(cursor: text)
            #expect(position != nil, "\(text)")
            #expect(position.map { FeedPosition(cursor: $0.cursor) } == position, "\(text)")
        }
        #expect(FeedPosition(cursor: "1109172:4") == FeedPosition(transaction: 1_109_172, position: 4))
        // Past what the log can number: the largest, after every transaction or every event of one.
        #expect(FeedPosition(cursor: "18446744073709551616:0") == FeedPosition(transaction: .max, position: 0))
        #expect(FeedPosition(cursor: "99999999999999999999:9999999999999999999") == FeedPosition(transaction: .max, position: .max))
        #expect(FeedPosition(cursor: "7:9223372036854775808") == FeedPosition(transaction: 7, position: .max))
        #expect(FeedPosition.start.cursor == "0:0")
    }

    @Test(arguments: [
        "", ":", "1:", ":1", "1", "1:2:3", "-1:0", "1:-2", "+1:0", " 1:0", "1:0 ", "1/0", "a:b", "1.0:2", "0x1:0",
        "1:２", String(repeating: "1", count: 21) + ":0", "0:" + String(repeating: "0", count: 20),
    ])
    func anythingElseIsNoCursor(_ text: String) {
        #expect(FeedPosition(cursor: text) == nil)
    }

    @Test func aMonthClosesThirtyOneDaysAfterItsLastInstant() throws {
        let september = try #require(LogMonth("2026-09"))
        #expect(september.description == "2026-09")
        #expect(september.start == Timestamp.parse("2026-09-01T00:00:00Z"))
        #expect(september.end == Timestamp.parse("2026-10-01T00:00:00Z"))
        #expect(september.closes == Timestamp.parse("2026-11-01T00:00:00Z"))
        #expect(!september.isClosed(at: Timestamp.parse("2026-10-31T23:59:59Z")!))
        #expect(september.isClosed(at: Timestamp.parse("2026-11-01T00:00:00Z")!))
        let december = try #require(LogMonth("2025-12"))
        #expect(december.end == Timestamp.parse("2026-01-01T00:00:00Z"))
    }

    @Test(arguments: ["2026-13", "2026-00", "2026-9", "26-09", "1969-12", "2026/09", "2026-09-01", "", "２０２６-09", "+026-09"])
    func aMonthIsYYYYMMFrom1970(_ text: String) {
        #expect(LogMonth(text) == nil)
    }
}
