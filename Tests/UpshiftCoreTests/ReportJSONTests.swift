import Foundation
import Testing
import UpshiftCore

/// A report's `dataAsOf` is in its JSON either way: an RFC 3339 timestamp, or an explicit `null` while
/// its projections have applied nothing (a reader can tell "not yet" from "not sent").
@Suite struct ReportJSONTests {
    static func json(_ report: some Encodable) throws -> [String: Any] {
        try #require(JSONSerialization.jsonObject(with: JSONEncoder().encode(report)) as? [String: Any])
    }

    @Test func dataAsOfIsATimestampOrAnExplicitNull() throws {
        let day = try #require(UTCDay("2026-06-01"))
        let recorded = try #require(Timestamp.parse("2026-06-01T12:30:00.250Z"))
        let empty = AdoptionReport(app: "a", platform: "ios", from: day, to: day, rows: [], dataAsOf: nil)
        let fresh = AdoptionReport(app: "a", platform: "ios", from: day, to: day, rows: [], dataAsOf: recorded)
        #expect(try Self.json(empty)["dataAsOf"] is NSNull)
        #expect(try Self.json(fresh)["dataAsOf"] as? String == "2026-06-01T12:30:00.250Z")
        #expect(try Self.json(fresh).keys.sorted() == ["app", "dataAsOf", "days", "from", "platform", "to"])
        let funnels = PromptFunnelReport(app: "a", platform: "ios", funnels: [], dataAsOf: nil)
        #expect(try Self.json(funnels)["dataAsOf"] is NSNull)
        #expect(fresh.dataAsOf == recorded)
    }
}
