import Foundation
import Testing
import UpshiftCore
import UpshiftWire

/// Phased rollouts through the admin API, the rollout worker of `serve` and the check (docs/ARCHITECTURE.md,
/// "Rollout schedules"): the application's clock is the test's, so a week of steps takes seconds.
@Suite struct RolloutScheduleEndpointTests {
    static let start = Timestamp.parse("2026-06-01T00:00:00Z")!

    /// The first install id (v5-shaped from a counter) whose bucket for expenses `version` is in `range`.
    static func install(_ version: String, bucket range: Range<Int>) -> String {
        var counter = 0
        while true {
            counter += 1
            let install = String(format: "00000000-0000-4000-8000-%012d", counter)
            if range.contains(Rollout.bucket(appId: "expenses", version: version, installId: install)) { return install }
        }
    }

    /// Polls `condition` until it holds or `limit` passes; the time it took.
    static func within(_ limit: Duration, _ what: String, _ condition: () async throws -> Bool) async throws -> Duration {
        let started = ContinuousClock.now
        while try await !condition() {
            guard ContinuousClock.now - started < limit else { throw HarnessError("\(what) not within \(limit)") }
            try await Task.sleep(for: .milliseconds(100))
        }
        return ContinuousClock.now - started
    }

    @Test func anAppStoreScheduleReachesTheCheckStepByStepWithTheScheduleInTheHistory() async throws {
        let harness = try await Harness.make(now: Self.start)
        let atOne = Self.install("2.0", bucket: 0..<100)  // admitted at 1 %
        let atTwo = Self.install("2.0", bucket: 100..<200)  // admitted from 2 %
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0  // the test asks again and again while it waits
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            let path = "/v1/apps/expenses/releases/ios/2.0"
            let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-05-31T23:00:00Z"),
                "rolloutSchedule": .string("appStore"),
            ]))
            #expect(created.status == 201)
            let release = try created.value()
            #expect(release["rolloutPercent"] == .number(1))
            #expect(release["rolloutSchedule"]?["kind"] == .string("appStore"))
            #expect(release["rolloutSchedule"]?["startsAt"] == .string("2026-06-01T00:00:00.000Z"))

            func action(_ install: String?) async throws -> String? {
                let query = "/v1/apps/expenses/check?platform=ios&version=1.0" + (install.map { "&install=\($0)" } ?? "")
                let reply = try await server.request(.GET, query)
                #expect(reply.status == 200)
                return try reply.value()["action"]?.stringValue
            }
            #expect(try await action(atOne) == "soft")
            #expect(try await action(atTwo) == "none")

            // Step 2 at 24 hours: the worker writes it and the check sees it.
            harness.clock.set(Self.start.addingTimeInterval(24 * 3_600))
            let seen = try await Self.within(.seconds(3), "step 2 in the check") { try await action(atTwo) == "soft" }
            print("RolloutScheduleEndpointTests: step 2 reached the check in \(seen)")
            var history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let newest = history["entries"]?.arrayValue?.first
            #expect(newest?["actor"] == .string("schedule") && newest?["reason"] == .string("schedule"))
            #expect(newest?["schedule"] == .object([
                "step": .number(2), "percent": .number(2), "skipped": .array([]), "resumed": .bool(false),
            ]))
            #expect(newest?["changes"]?["rolloutPercent"] == .object(["from": .number(1), "to": .number(2)]))

            // Down from 25 h to 100 h: one write applies step 5 (20 %) and names 3 and 4.
            harness.clock.set(Self.start.addingTimeInterval(100 * 3_600))
            _ = try await Self.within(.seconds(3), "step 5") {
                try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(20)
            }
            history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let scheduled = history["entries"]?.arrayValue?.filter { $0["actor"] == .string("schedule") } ?? []
            #expect(scheduled.count == 2, "one write after the downtime")
            #expect(scheduled.first?["schedule"]?["skipped"] == .array([.number(3), .number(4)]))

            // Pause: nothing comes due; 30 hours later, resume: step 6 (120 h) comes at 150 h.
            var etag = try await server.send(.GET, path, key: key).etag ?? ""
            let paused = try await server.send(.PATCH, path, key: key, json: .object([
                "rolloutAction": .string("pause"), "reason": .string("crash report under review"),
            ]), headers: [("If-Match", etag)])
            #expect(paused.status == 200)
            #expect(try paused.value()["rolloutSchedule"]?["state"] == .string("paused"))
            harness.clock.set(Self.start.addingTimeInterval(130 * 3_600))
            try await Task.sleep(for: .seconds(1.5))
            #expect(try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(20), "paused")
            etag = paused.etag ?? ""
            let resumed = try await server.send(.PATCH, path, key: key, json: .object(["rolloutAction": .string("resume")]),
                headers: [("If-Match", etag)])
            #expect(resumed.status == 200)
            harness.clock.set(Self.start.addingTimeInterval(149 * 3_600))
            try await Task.sleep(for: .seconds(1.5))
            #expect(try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(20), "30 h later")
            harness.clock.set(Self.start.addingTimeInterval(150 * 3_600))
            _ = try await Self.within(.seconds(3), "step 6 after the pause") {
                try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(50)
            }

            // Halt: offered to nobody; release to everyone: 100 %, the schedule ends, a check without install sees it.
            etag = try await server.send(.GET, path, key: key).etag ?? ""
            let halted = try await server.send(.PATCH, path, key: key, json: .object(["rolloutAction": .string("halt")]),
                headers: [("If-Match", etag)])
            #expect(try halted.value()["rolloutPaused"] == .bool(true))
            #expect(try await action(atOne) == "none")
            let everyone = try await server.send(.PATCH, path, key: key, json: .object(["rolloutAction": .string("release")]),
                headers: [("If-Match", halted.etag ?? "")])
            let released = try everyone.value()
            #expect(released["rolloutPercent"] == .number(100) && released["rolloutPaused"] == .bool(false))
            #expect(released["rolloutSchedule"] == nil)
            #expect(try await action(nil) == "soft")
        }
    }

    @Test func aHandEditEndsTheScheduleAndBadSchedulesAreRefusedNamingTheStep() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            let key = harness.adminKey
            let steps: JSONValue = .array([
                .object(["percent": .number(10), "afterHours": .number(0)]),
                .object(["percent": .number(100), "afterHours": .number(1)]),
            ])
            let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                "platform": .string("ios"), "version": .string("3.0"), "releasedAt": .string("2026-05-31T00:00:00Z"),
                "rolloutSchedule": steps,
            ]))
            #expect(created.status == 201)
            let path = "/v1/apps/expenses/releases/ios/3.0"
            let edited = try await server.send(.PATCH, path, key: key, json: .object(["rolloutPercent": .number(40)]),
                headers: [("If-Match", created.etag ?? "")])
            #expect(edited.status == 200)
            #expect(try edited.value()["rolloutSchedule"] == nil)
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            #expect(history["entries"]?.arrayValue?.first?["changes"]?["rolloutSchedule"]?["to"] == nil)
            #expect(history["entries"]?.arrayValue?.first?["changes"]?["rolloutSchedule"]?["from"]?["kind"] == .string("custom"))
            // An hour later the worker has nothing to do: 40 % stays.
            harness.clock.set(Self.start.addingTimeInterval(2 * 3_600))
            try await Task.sleep(for: .seconds(1.5))
            #expect(try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(40))

            // Refused: a schedule below what is admitted (422), a bad step (400 naming it), a pause without schedule.
            let etag = edited.etag ?? ""
            let lower = try await server.send(.PATCH, path, key: key, json: .object(["rolloutSchedule": .string("appStore")]),
                headers: [("If-Match", etag)])
            #expect(lower.status == 422)
            #expect(try lower.value()["field"] == .string("rolloutSchedule"))
            let bad = try await server.send(.PATCH, path, key: key, json: .object(["rolloutSchedule": .array([
                .object(["percent": .number(50), "afterHours": .number(0)]),
                .object(["percent": .number(50), "afterHours": .number(5)]),
            ])]), headers: [("If-Match", "\"999\"")])
            #expect(bad.status == 422, "steps that contradict each other, whatever the revision")
            #expect(try bad.value()["field"] == .string("rolloutSchedule[1].percent"))
            let malformed = try await server.send(.PATCH, path, key: key, json: .object(["rolloutSchedule": .array([
                .object(["percent": .number(50), "afterHours": .number(0)]),
                .object(["percent": .number(100), "afterHours": .string("soon")]),
            ])]), headers: [("If-Match", "\"999\"")])
            #expect(malformed.status == 400, "a malformed step is a 400 whatever the revision")
            #expect(try malformed.value()["field"] == .string("rolloutSchedule[1].afterHours"))
            let pause = try await server.send(.PATCH, path, key: key, json: .object(["rolloutAction": .string("pause")]),
                headers: [("If-Match", etag)])
            #expect(pause.status == 422)
            #expect(try pause.value()["field"] == .string("rolloutAction"))
        }
    }
}
