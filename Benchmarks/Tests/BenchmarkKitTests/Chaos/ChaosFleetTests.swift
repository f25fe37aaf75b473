import Foundation
import Testing

@testable import BenchmarkKit

/// The events and checks of the chaos load.
@Suite struct ChaosFleetTests {
    static let now = Date(timeIntervalSince1970: 1_795_000_000.5)

    @Test func aBatchIsJSONWithItsIdsInOrder() throws {
        var fleet = ChaosFleet(app: "chaos", installs: 50, seed: 3)
        let batch = fleet.batch(100, now: Self.now)
        #expect(Set(batch.ids).count == 100)
        let object = try #require(try JSONSerialization.jsonObject(with: batch.body) as? [String: Any])
        let events = try #require(object["events"] as? [[String: String]])
        #expect(events.map { UUID(uuidString: $0["id"]!)! } == batch.ids)
        let installs = Set(fleet.installs.map { $0.id.uuidString.lowercased() })
        for event in events {
            #expect(event["appId"] == "chaos")
            #expect(installs.contains(event["installId"]!))
            #expect(ChaosFleet.versions.contains(event["appVersion"]!))
            // Extra fields by type (docs/openapi.yaml, schema "Event").
            switch event["type"]! {
            case "prompt_shown", "update_started": #expect(event["promptKind"] != nil && event["targetVersion"] != nil)
            case "prompt_dismissed": #expect(event["dismissAction"] != nil && event["promptKind"] == "soft")
            case "updated": #expect(event["fromVersion"] != nil && event["fromVersion"] != event["appVersion"])
            case "blocked": #expect(event["targetVersion"] != nil)
            case "launched", "whats_new_shown": break
            default: Issue.record("unexpected type \(event["type"]!)")
            }
            let at = try #require(event["occurredAt"])
            #expect(at.hasSuffix("Z") && at.count == 24)
        }
    }

    /// Every projection gets work: a few hundred events hold every type.
    @Test func batchesHoldEveryType() throws {
        var fleet = ChaosFleet(app: "chaos", installs: 200, seed: 11)
        var types = Set<String>()
        for _ in 0..<5 {
            let object = try JSONSerialization.jsonObject(with: fleet.batch(100, now: Self.now).body) as! [String: Any]
            for event in object["events"] as! [[String: String]] { types.insert(event["type"]!) }
        }
        // abnormal_exit is not one of them: the server takes it (docs/openapi.yaml, schema "EventType"), but
        // the chaos load predates it and does not send it.
        #expect(types == [
            "launched", "prompt_shown", "prompt_dismissed", "update_started", "updated", "blocked", "whats_new_shown",
        ])
    }

    @Test func theSeedReplaysTheFleet() {
        var a = ChaosFleet(app: "chaos", installs: 10, seed: 5), b = ChaosFleet(app: "chaos", installs: 10, seed: 5)
        #expect(a.installs == b.installs)
        #expect(a.batch(3, now: Self.now) == b.batch(3, now: Self.now))
        #expect(a.checkQuery() == b.checkQuery())
        #expect(ChaosFleet(app: "chaos", installs: 10, seed: 6).installs != a.installs)
    }

    @Test func idsAreVersion4UUIDs() {
        var random = SeededRandom(seed: 9)
        for _ in 0..<100 {
            let text = ChaosFleet.uuid(&random).uuidString
            #expect(Array(text)[14] == "4")
            #expect("89AB".contains(Array(text)[19]))
        }
    }

    @Test func timestampsAreRFC3339InUTCWithMilliseconds() {
        #expect(ChaosFleet.timestamp(Date(timeIntervalSince1970: 0)) == "1970-01-01T00:00:00.000Z")
        #expect(ChaosFleet.timestamp(Date(timeIntervalSince1970: 1_795_000_000.5)) == "2026-11-18T11:06:40.500Z")
    }

    @Test func aCheckNamesAnInstallOfTheFleet() {
        var fleet = ChaosFleet(app: "chaos", installs: 5, seed: 1)
        let query = fleet.checkQuery()
        #expect(query.hasPrefix("platform="))
        #expect(fleet.installs.contains { query.hasSuffix("&install=" + $0.id.uuidString.lowercased()) })
    }

    /// The ids of a 200 the server stored (accepted, or a duplicate of what it had), and those it rejected.
    @Test func settlesABatchFromTheAnswer() throws {
        var fleet = ChaosFleet(app: "chaos", installs: 5, seed: 1)
        let batch = fleet.batch(3, now: Self.now)
        let answer = try IngestAnswer(parsing: Data(
            """
            {"accepted":1,"duplicates":1,"rejected":1,"results":[{"index":0,"id":"x","status":"accepted"},
            {"index":1,"status":"rejected","error":{"code":"id_conflict"}},{"index":2,"status":"duplicate"}]}
            """.utf8))
        let settled = answer.settle(batch)
        #expect(settled.stored == [batch.ids[0], batch.ids[2]])
        #expect(settled.duplicates == 1)
        #expect(settled.rejected == ["id_conflict"])
        #expect(throws: BenchParseError.self) { try IngestAnswer(parsing: Data("{\"accepted\":1}".utf8)) }
    }
}
