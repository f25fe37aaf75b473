import Foundation
import Testing
import UpshiftCore
import UpshiftWire

/// Phased rollouts through the admin API, the rollout worker of `serve` and the check (docs/ARCHITECTURE.md,
/// "Rollout schedules"): the application's clock is the test's, so a week of steps takes seconds.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct RolloutScheduleEndpointTests {
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
            // The dashboard's history says the same.
            var browser = DashboardTests.Browser(server: server)
            _ = try await browser.signIn(harness.readKey)
            let page = try await browser.get("/dashboard/apps/expenses/history")
            #expect(page.text.contains("step 5 of the schedule (20 %); skipped steps 3, 4, due while no worker ran"), "\(page.text)")

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

    /// The feeds list a scheduled release once its schedule reaches 100 % (a feed cannot admit per
    /// install), and a withdrawal through the API ends a schedule: no step is written after it.
    @Test func feedsListAScheduledReleaseAt100PercentAndAWithdrawalEndsASchedule() async throws {
        let harness = try await Harness.make(now: Self.start)
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            func release(_ version: String) async throws -> Server.Reply {
                try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                    "platform": .string("ios"), "version": .string(version), "releasedAt": .string("2026-05-20T00:00:00Z"),
                    "rolloutSchedule": .array([
                        .object(["percent": .number(10), "afterHours": .number(0)]),
                        .object(["percent": .number(100), "afterHours": .number(1)]),
                    ]),
                ]))
            }
            #expect(try await release("2.0").status == 201)
            func listed() async throws -> Bool {
                let feed = try await server.request(.GET, "/v1/apps/expenses/versions.plist?platform=ios")
                #expect(feed.status == 200)
                return feed.text.contains("<key>2.0</key>")
            }
            #expect(try await !listed(), "at 10 % a feed leaves the release out")
            harness.clock.set(Self.start.addingTimeInterval(3_600))
            let took = try await Self.within(.seconds(3), "the feed listing 2.0 at 100 %") { try await listed() }
            print("a feed listed the release \(took) after its last step was due")

            // 2.1 withdrawn at 10 %: its schedule ends, and an hour later nothing has moved it.
            let created = try await release("2.1")
            #expect(created.status == 201)
            let path = "/v1/apps/expenses/releases/ios/2.1"
            let withdrawn = try await server.send(.PATCH, path, key: key, json: .object(["status": .string("withdrawn")]),
                headers: [("If-Match", created.etag ?? "")])
            #expect(withdrawn.status == 200)
            #expect(try withdrawn.value()["rolloutSchedule"] == nil)
            harness.clock.set(Self.start.addingTimeInterval(3 * 3_600))
            try await Task.sleep(for: .seconds(1.5))
            let after = try await server.send(.GET, path, key: key).value()
            #expect(after["rolloutPercent"] == .number(10) && after["status"] == .string("withdrawn"))
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let latest = history["entries"]?.arrayValue?.first
            #expect(latest?["actor"] != .string("schedule"), "no step after the withdrawal")
            #expect(latest?["changes"]?["rolloutSchedule"]?["from"]?["kind"] == .string("custom"))
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

            // Hostile values of the new fields, raw: a huge number, NUL, over-long, the wrong type, sent twice.
            let long = String(repeating: "x", count: 100_000)
            let hostile = [
                #"{"rolloutSchedule": [{"percent": 1e400, "afterHours": 0}, {"percent": 100, "afterHours": 1}]}"#,
                #"{"rolloutSchedule": [{"percent": 10, "afterHours": 1e308}, {"percent": 100, "afterHours": 1}]}"#,
                #"{"rolloutSchedule": "appStore\#u{0}"}"#, "{\"rolloutSchedule\": \"\(long)\"}",
                #"{"rolloutSchedule": {"percent": 100, "afterHours": 0}}"#, #"{"rolloutSchedule": 7}"#,
                #"{"rolloutAction": "pause\#u{0}"}"#, "{\"rolloutAction\": \"\(long)\"}", #"{"rolloutAction": ["halt"]}"#,
                #"{"rolloutAction": "halt", "rolloutAction": "release"}"#,
                #"{"rolloutSchedule": "appStore", "rolloutSchedule": "appStore"}"#,
            ]
            for body in hostile {
                let reply = try await server.request(
                    .PATCH, path, headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json"), ("If-Match", etag)],
                    body: Data(body.utf8))
                #expect(reply.status == 400, "\(body.prefix(120)): \(reply.status)")
            }
            #expect(try await server.send(.GET, path, key: key).etag == etag, "none of them changed the release")
        }
    }
    /// A schedule follows its release: moved while step 1 runs it starts again at the new
    /// date, held time carried over, and the history says so; after step 2 a move that would leave step 2
    /// not yet due is `422` naming `releasedAt`, unless the same PATCH ends the schedule.
    @Test func aScheduleFollowsItsReleaseDateUntilALaterStepIsApplied() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            let key = harness.adminKey
            let path = "/v1/apps/expenses/releases/ios/2.0"
            let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                "platform": "ios", "version": "2.0", "releasedAt": "2026-06-01T00:00:00Z", "rolloutSchedule": "appStore",
            ]))
            #expect(created.status == 201)
            func patch(_ body: JSONValue) async throws -> Server.Reply {
                let etag = try #require(try await server.send(.GET, path, key: key).etag)
                return try await server.send(.PATCH, path, key: key, json: body, headers: [("If-Match", etag)])
            }
            // Two hours paused: held time and the pause budget.
            harness.clock.set(Self.start.addingTimeInterval(3_600))
            #expect(try await patch(.object(["rolloutAction": "pause"])).status == 200)
            harness.clock.set(Self.start.addingTimeInterval(3 * 3_600))
            #expect(try await patch(.object(["rolloutAction": "resume"])).status == 200)

            // Slipped from Monday to Wednesday: the schedule starts again on Wednesday.
            let moved = try await patch(.object(["releasedAt": "2026-06-03T00:00:00Z", "reason": "slipped"]))
            #expect(moved.status == 200, "\(moved.text)")
            let schedule = try moved.value()["rolloutSchedule"]
            #expect(schedule?["startsAt"] == "2026-06-03T00:00:00.000Z" && schedule?["step"] == .number(1))
            #expect(schedule?["heldSeconds"] == .number(7_200) && schedule?["pausedSeconds"] == .number(7_200), "\(moved.text)")
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            #expect(history["entries"]?.arrayValue?.first?["schedule"]?["reanchoredAt"] == "2026-06-03T00:00:00.000Z", "\(history)")

            // Step 2 is due 24 h after Wednesday plus the 2 h held, not after Monday.
            harness.clock.set(Timestamp.parse("2026-06-04T01:00:00Z")!)
            try await Task.sleep(for: .seconds(1))
            #expect(try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(1))
            harness.clock.set(Timestamp.parse("2026-06-04T02:00:00Z")!)
            _ = try await Self.within(.seconds(3), "step 2") {
                try await server.send(.GET, path, key: key).value()["rolloutPercent"] == .number(2)
            }

            // After step 2, a move that leaves it not yet due is refused, naming releasedAt and the way out.
            let late = try await patch(.object(["releasedAt": "2026-06-04T00:00:00Z"]))
            #expect(late.status == 422)
            #expect(try late.value()["field"] == "releasedAt")
            #expect(late.text.contains("end the schedule (rolloutSchedule: null) or replace it in the same PATCH"), "\(late.text)")
            // The same PATCH that ends the schedule is taken: the percentage stays.
            let ended = try await patch(.object(["releasedAt": "2026-06-04T00:00:00Z", "rolloutSchedule": .null]))
            #expect(ended.status == 200, "\(ended.text)")
            #expect(try ended.value()["rolloutPercent"] == .number(2) && (try ended.value()["rolloutSchedule"] ?? .null) == .null)
        }
    }
}
