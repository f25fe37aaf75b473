import Foundation
import Testing
import UpshiftCore
import UpshiftWire

/// Play-style `priority` and `stalenessDays` in the check answer (docs/ARCHITECTURE.md, "Priority and
/// staleness"), through HTTP: from the catalog snapshot and its rollout history, each install its own
/// staleness even when the decision is a cached one.
@Suite(.serverTimeLimit) struct PlayFieldsTests {
    static let start = Timestamp.parse("2026-03-01T00:00:00Z")!

    /// The first install ids (v5 of a counter) whose bucket for expenses 2.0 is below 1,000 and at least 1,000.
    static func installs() -> (early: String, late: String) {
        var early: String?
        var late: String?
        var counter = 0
        while early == nil || late == nil {
            counter += 1
            let install = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", counter))!.uuidString.lowercased()
            let bucket = Rollout.bucket(appId: "expenses", version: "2.0", installId: install)
            if bucket < 1_000, early == nil { early = install }
            if bucket >= 1_000, late == nil { late = install }
        }
        return (early!, late!)
    }

    @Test func stalenessCountsFromWhenTheRolloutAdmittedEachInstall() async throws {
        let harness = try await Harness.make(now: Self.start)
        let (early, late) = Self.installs()
        try await harness.run { server in
            let key = harness.adminKey
            // 2.0 out on March 1 to 10%, to everyone on March 4; notified a day after its release.
            #expect(try await server.send(.PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "notifyAfterDays": .number(1)]), headers: [("If-Match", "\"0\"")]).status == 200)
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-03-01T00:00:00Z"),
                "rolloutPercent": .number(10), "priority": .number(2),
            ])).status == 201)
            harness.clock.set(Timestamp.parse("2026-03-04T00:00:00Z")!)
            let raised = try await server.send(.PATCH, "/v1/apps/expenses/releases/ios/2.0", key: key,
                json: .object(["rolloutPercent": .number(100)]), headers: [("If-Match", "\"1\"")])
            #expect(raised.status == 200)
            // The history: 10% from the release's creation, 100% from the raise.
            #expect(try raised.value()["rolloutHistory"] == .array([
                .object(["at": .string("2026-03-01T00:00:00.000Z"), "percent": .number(10)]),
                .object(["at": .string("2026-03-04T00:00:00.000Z"), "percent": .number(100)]),
            ]))

            harness.clock.set(Timestamp.parse("2026-03-09T12:00:00Z")!)
            func answer(_ install: String?) async throws -> (JSONValue, String?) {
                let query = "/v1/apps/expenses/check?platform=ios&version=1.0" + (install.map { "&install=\($0)" } ?? "")
                let reply = try await server.request(.GET, query)
                #expect(reply.status == 200)
                return (try reply.value(), reply.etag)
            }
            // Without an install the field is there and null; the decision is then reused for each install,
            // each with its own days: since March 2 (notified) for the early one, since March 4 for the other.
            let (anonymous, anonymousTag) = try await answer(nil)
            #expect(anonymous["action"] == .string("soft"))
            #expect(anonymous["stalenessDays"] == .null)
            #expect(anonymous["priority"] == .number(2))
            let (first, firstTag) = try await answer(early)
            let (second, secondTag) = try await answer(late)
            #expect(first["stalenessDays"] == .number(7))
            #expect(second["stalenessDays"] == .number(5))
            #expect(Set([anonymousTag, firstTag, secondTag]).count == 3, "each body has its own ETag")
            #expect(try await answer(early).0["stalenessDays"] == .number(7), "asked again, the same")

            // A day later each has one more; an install up to date has neither field.
            harness.clock.set(Timestamp.parse("2026-03-10T12:00:00Z")!)
            #expect(try await answer(late).0["stalenessDays"] == .number(6))
            let current = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=2.0&install=\(early)").value()
            #expect(current["action"] == .string("none"))
            #expect(current["priority"] == nil && current["stalenessDays"] == nil)
        }
    }

    @Test func priorityIsTheHighestOfferedAndFiveForAForce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            let key = harness.adminKey
            for (version, priority) in [("1.5", 4), ("2.0", 1), ("2.1", nil)] as [(String, Int?)] {
                var release: [String: JSONValue] = [
                    "platform": .string("ios"), "version": .string(version), "releasedAt": .string("2026-02-01T00:00:00Z"),
                ]
                if let priority { release["priority"] = .number(JSONNumber(priority)) }
                #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object(release)).status == 201)
            }
            func priority(_ version: String) async throws -> JSONValue? {
                try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=\(version)").value()["priority"]
            }
            #expect(try await priority("1.0") == .number(4))  // 1.5, 2.0 and 2.1 offered past 1.0
            #expect(try await priority("1.5") == .number(1))  // 1.5 is installed: 2.0 and 2.1 only
            #expect(try await priority("2.0") == .number(0))  // 2.1 has none
            // PATCH changes it, and a value outside 0–5 is refused naming the field.
            let path = "/v1/apps/expenses/releases/ios/2.1"
            let bad = try await server.send(.PATCH, path, key: key, json: .object(["priority": .number(6)]), headers: [("If-Match", "\"1\"")])
            #expect(bad.status == 400)
            #expect(try bad.value()["field"] == .string("priority"))
            #expect(try await server.send(.PATCH, path, key: key, json: .object(["priority": .number(3)]), headers: [("If-Match", "\"1\"")]).status == 200)
            #expect(try await priority("2.0") == .number(3))
            // Below the minimum: a force, whatever the releases say.
            #expect(try await server.send(.PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "minimumVersion": .string("2.0")]), headers: [("If-Match", "\"0\"")]).status == 200)
            let forced = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.5").value()
            #expect(forced["action"] == .string("force"))
            #expect(forced["priority"] == .number(5))
        }
    }
}
