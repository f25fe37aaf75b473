import Foundation
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftTestSupport
import UpshiftWire

/// Rules through `serve` (docs/OPERATIONS.md, "Rules"): written and read over the API with revisions, and
/// evaluated by the rollout worker on the application's clock, which is the test's: each step of the clock
/// by the rules' interval is one evaluation.
@Suite(.serverTimeLimit) struct RuleEndpointTests {
    static let start = Timestamp.parse("2026-06-01T12:00:00Z")!
    static let interval: TimeInterval = 60

    @Test func rulesAreWrittenWithRevisionsAndBadDefinitionsAreRefusedNamingTheField() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            let key = harness.adminKey
            let path = "/v1/apps/expenses/rules/ios/crash-guard"
            let guarded: JSONValue = .object(["kind": .string("halt_on_health"), "mode": .string("guarded"), "reason": .string("guard 2.x")])
            #expect(try await server.send(.PUT, path, key: key, json: guarded).status == 428)
            let created = try await server.send(.PUT, path, key: key, json: guarded, headers: [("If-Match", "\"0\"")])
            #expect(created.status == 200)
            #expect(created.etag == "\"1\"")
            let rule = try created.value()
            #expect(rule["state"] == .string("dry-run"), "a new rule is a dry run")
            #expect(rule["id"] == .string("crash-guard") && rule["platform"] == .string("ios") && rule["mode"] == .string("guarded"))
            // The same write again changes nothing; a stale one is refused.
            #expect(try await server.send(.PUT, path, key: key, json: guarded, headers: [("If-Match", "\"1\"")]).etag == "\"1\"")
            #expect(try await server.send(.PUT, path, key: key, json: guarded, headers: [("If-Match", "\"0\"")]).status == 412)
            #expect(try await server.send(.GET, path, key: harness.readKey).value() == rule)
            let listed = try await server.send(.GET, "/v1/apps/expenses/rules", key: harness.readKey).value()
            #expect(listed["rules"] == .array([rule]))
            // A read token reads and cannot write.
            #expect(try await server.send(.PUT, path, key: harness.readKey, json: guarded, headers: [("If-Match", "\"1\"")]).status == 403)

            for (body, field) in [
                (#"{"kind":"raise_minimum","version":"two","share":0.9,"windowDays":7,"maximumForced":10}"#, "version"),
                (#"{"kind":"raise_minimum","version":"2.0","share":0.9,"windowDays":7}"#, "maximumForced"),
                (#"{"kind":"raise_minimum","version":"2.0","share":1.2,"windowDays":7,"maximumForced":10}"#, "share"),
                (#"{"kind":"halt_on_health","mode":"threshold","excess":-1,"minimumInstalls":10}"#, "excess"),
                (#"{"kind":"halt_on_everything"}"#, "kind"),
                // Hostile values of every new field: a huge number, a wrong type, a member sent twice, NUL, over-long.
                (#"{"kind":"halt_on_health","mode":"threshold","excess":0.1,"minimumInstalls":1e400}"#, "minimumInstalls"),
                (#"{"kind":"halt_on_health","mode":"threshold","excess":"0.1","minimumInstalls":10}"#, "excess"),
                (#"{"kind":"advance","state":"live","state":"off"}"#, "state"),
                (#"{"kind":"halt_on_prompts","unfinishedRate":1e400,"minimumInstalls":10}"#, "unfinishedRate"),
                (#"{"kind":"halt_on_prompts","unfinishedRate":"0.2","minimumInstalls":10}"#, "unfinishedRate"),
                (#"{"kind":"halt_on_prompts","unfinishedRate":0.2,"unfinishedRate":0.3,"minimumInstalls":10}"#, "unfinishedRate"),
                (#"{"kind":"halt_on_prompts","unfinishedRate":1.5,"minimumInstalls":10}"#, "unfinishedRate"),
                (#"{"kind":"advance\u0000"}"#, "kind"),
                ("{\"kind\":\"advance\",\"reason\":\"" + String(repeating: "x", count: 1_001) + "\"}", "reason"),
            ] {
                let reply = try await server.request(
                    .PUT, "/v1/apps/expenses/rules/ios/hostile",
                    headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json"), ("If-Match", "\"0\"")],
                    body: Data(body.utf8))
                #expect(reply.status == 400, "\(body.prefix(80))")
                #expect(try reply.value()["field"] == .string(field), "\(body.prefix(80)): \(reply.text)")
            }
            for path in [
                "/v1/apps/expenses/rules/ios/" + String(repeating: "a", count: 64), "/v1/apps/expenses/rules/ios/a%00b",
                "/v1/apps/expenses/rules/ios/crash-guard/records?limit=0",
                "/v1/apps/expenses/rules/ios/crash-guard/records?limit=99999999999999999999999",
                "/v1/apps/expenses/rules?platform=%00", "/v1/apps/expenses/rules?platform=ios&platform=android",
            ] {
                #expect(try await server.send(.GET, path, key: key).status == 400, "\(path)")
            }
            let huge = try await server.request(
                .PUT, "/v1/apps/expenses/rules/ios/hostile",
                headers: [("Authorization", "Bearer \(key)"), ("Content-Type", "application/json"), ("If-Match", "\"0\"")],
                body: Data(("{\"kind\":\"advance\",\"reason\":\"" + String(repeating: "x", count: 300_000) + "\"}").utf8))
            #expect(huge.status == 413)
            let badId = try await server.send(.GET, "/v1/apps/expenses/rules/ios/Crash_Guard", key: key)
            #expect(badId.status == 400)
            #expect(try badId.value()["field"] == .string("rule"))
            #expect(try await server.send(.GET, "/v1/apps/expenses/rules/ios/nothing", key: key).status == 404)

            // At most 20 per app and platform.
            for index in 1..<20 {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/advance-\(index)", key: key, json: .object(["kind": .string("advance")]),
                    headers: [("If-Match", "\"0\"")])
                #expect(reply.status == 200)
            }
            let full = try await server.send(
                .PUT, "/v1/apps/expenses/rules/ios/one-more", key: key, json: .object(["kind": .string("advance")]),
                headers: [("If-Match", "\"0\"")])
            #expect(full.status == 422)
            #expect(try full.value()["field"] == .string("rule"))
            // Another platform has its own 20.
            #expect(
                try await server.send(
                    .PUT, "/v1/apps/expenses/rules/android/one-more", key: key, json: .object(["kind": .string("advance")]),
                    headers: [("If-Match", "\"0\"")]
                ).status == 200)

            // Removing frees a place, and the history says who wrote and removed what.
            #expect(try await server.send(.DELETE, path, key: key, headers: [("If-Match", "\"0\"")]).status == 412)
            #expect(try await server.send(.DELETE, path, key: key, headers: [("If-Match", "\"1\"")]).status == 204)
            #expect(try await server.send(.GET, path, key: key).status == 404)
            let history = try await server.send(.GET, "/v1/apps/expenses/history?limit=500", key: key).value()
            let entries = history["entries"]?.arrayValue ?? []
            #expect(entries.first?["type"] == .string("rule_removed") && entries.first?["rule"] == .string("crash-guard"))
            let written = entries.first { $0["type"] == .string("rule_replaced") && $0["rule"] == .string("crash-guard") }
            #expect(written?["reason"] == .string("guard 2.x"))
            #expect(written?["actor"]?.stringValue?.hasPrefix("owner") == true)
        }
    }

    static func configuration(_ harness: Harness) -> AppConfiguration {
        var configuration = harness.configuration()
        configuration.projections.rulesInterval = interval
        return configuration
    }

    /// Adds iOS releases at 100 %: (version, releasedAt).
    static func release(_ server: Server, _ harness: Harness, _ releases: (String, String)...) async throws {
        for (version, released) in releases {
            let reply = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
                "platform": .string("ios"), "version": .string(version), "releasedAt": .string(released),
            ]))
            #expect(reply.status == 201)
        }
    }

    /// Adds 2.0 on a schedule of 1 %, 50 % an hour later and 100 % an hour after that.
    static func releaseOnAnHourlySchedule(_ server: Server, _ harness: Harness) async throws {
        let steps: JSONValue = .array([
            .object(["percent": 1, "afterHours": 0]), .object(["percent": 50, "afterHours": 1]), .object(["percent": 100, "afterHours": 2]),
        ])
        let reply = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
            "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-05-30T00:00:00Z"),
            "rolloutSchedule": steps,
        ]))
        #expect(reply.status == 201, "\(reply.text)")
    }

    /// 2.0 on an hourly schedule, 40 % of its 50 prompted installs skipping it, a dry-run prompt rule at 30 %
    /// and a live advance rule (both revision 1); an hour on, the evaluations hold its second step.
    static func holdTheSecondStep(_ server: Server, _ harness: Harness) async throws {
        try await release(server, harness, ("1.0", "2026-04-01T00:00:00Z"))
        try await releaseOnAnHourlySchedule(server, harness)
        try await prompted(server, harness, installs: 50, skipping: 20)
        try await harness.waitForProjections()
        let skips: JSONValue = ["kind": "halt_on_prompts", "skipRate": 0.3, "minimumInstalls": 50, "state": "dry-run"]
        for (id, body) in [("skips", skips), ("advance", ["kind": "advance", "state": "live"] as JSONValue)] {
            let reply = try await server.send(
                .PUT, "/v1/apps/expenses/rules/ios/\(id)", key: harness.adminKey, json: body, headers: [("If-Match", "\"0\"")])
            #expect(reply.status == 200, "\(reply.text)")
        }
        try await harness.waitForProjections()
        harness.clock.advance(by: 3_600)
        try await evaluate(server, harness)
    }

    /// Two evaluations of the rules, the second begun after everything before this call.
    static func evaluate(_ server: Server, _ harness: Harness) async throws {
        for _ in 0..<2 {
            let before = try await server.metric("upshift_rule_evaluations_total") ?? 0
            harness.clock.advance(by: interval)
            try await Waits.until("an evaluation of the rules", timeout: .seconds(30)) {
                try await server.metric("upshift_rule_evaluations_total") ?? 0 > before
            }
        }
    }

    /// One install's day: `launched` on `version`, and an `abnormal_exit` two hours later when `exits`.
    static func day(_ install: String, platform: String, version: String, at time: Date, exits: Bool) -> [[String: String]] {
        func event(_ type: String, _ at: Date) -> [String: String] {
            [
                "id": UUID().uuidString, "type": type, "installId": install, "platform": platform, "appVersion": version,
                "osVersion": "17.2", "occurredAt": Timestamp.format(at),
            ]
        }
        return [event("launched", time)] + (exits ? [event("abnormal_exit", time.addingTimeInterval(7_200))] : [])
    }

    @Test func aHealthRuleSkipsWhileLaggingRecordsADryRunOnceHaltsWhenLiveAndNeverUndoesAPerson() async throws {
        let harness = try await Harness.make(now: Self.start)
        let blocked = Mutex(true)
        var configuration = harness.configuration()
        configuration.projections.rulesInterval = Self.interval
        configuration.projections.beforeCommit = { name in
            if name == "release_health", blocked.withLock({ $0 }) { throw HarnessError("release_health held back by the test") }
        }
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            let previousDay = Timestamp.parse("2026-05-04T00:00:00Z")!, releaseDay = Timestamp.parse("2026-05-18T00:00:00Z")!
            for platform in ["ios", "android"] {
                for (version, day, percent) in [("1.0", previousDay, 100), ("2.0", releaseDay, 50)] {
                    let reply = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                        "platform": .string(platform), "version": .string(version), "releasedAt": .string(Timestamp.format(day)),
                        "rolloutPercent": .number(JSONNumber(percent)),
                    ]))
                    #expect(reply.status == 201)
                }
            }
            // 100 installs on each release's first day: 1.0 exits 2 % of them on iOS and none on Android,
            // 2.0 30 % on both.
            var events: [[String: String]] = []
            for index in 0..<100 {
                for platform in ["ios", "android"] {
                    events += Self.day(
                        UUID().uuidString, platform: platform, version: "1.0", at: previousDay.addingTimeInterval(36_000),
                        exits: platform == "ios" && index < 2)
                    events += Self.day(
                        UUID().uuidString, platform: platform, version: "2.0", at: releaseDay.addingTimeInterval(36_000),
                        exits: index < 30)
                }
            }
            for part in stride(from: 0, to: events.count, by: 200) {
                #expect(try await server.postEvents(Array(events[part..<min(part + 200, events.count)]), key: harness.ingestKey).status == 200)
            }
            func put(_ platform: String, _ body: [String: JSONValue], revision: Int) async throws {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/\(platform)/crash-guard", key: key, json: .object(body),
                    headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200, "\(reply.text)")
            }
            let threshold: [String: JSONValue] = [
                "kind": .string("halt_on_health"), "mode": .string("threshold"), "excess": .number(0.1), "minimumInstalls": .number(50),
            ]
            try await put("ios", threshold, revision: 0)
            try await put("android", threshold.merging(["state": .string("live")]) { $1 }, revision: 0)

            /// The rule's records, newest first: of 2.0 (1.0, the first release, has no baseline ever), and the skips.
            func records(_ platform: String) async throws -> [JSONValue] {
                try await server.send(.GET, "/v1/apps/expenses/rules/\(platform)/crash-guard/records", key: harness.readKey)
                    .value()["records"]?.arrayValue?.filter { $0["version"] != .string("1.0.0") } ?? []
            }
            func paused(_ platform: String) async throws -> Bool {
                try await server.send(.GET, "/v1/apps/expenses/releases/\(platform)/2.0", key: key).value()["rolloutPaused"] == .bool(true)
            }
            func evaluate() async throws { try await Self.evaluate(server, harness) }

            // release_health has applied nothing: 10 minutes on, it lags by more than 5, and the rules skip.
            harness.clock.advance(by: 600)
            try await evaluate()
            let skipped = try await records("android")
            #expect(skipped.count == 1, "a skip is recorded once, not at every evaluation")
            #expect(skipped.first?["outcome"] == .string("skipped"))
            #expect(skipped.first?["summary"]?.stringValue?.contains("release_health lags by more than 300 s") == true)
            #expect(try await !paused("android"))

            blocked.withLock { $0 = false }
            try await harness.waitForProjections()
            try await evaluate()
            // iOS: a dry run records the halt it would make, once, and halts nothing.
            var ios = try await records("ios")
            #expect(ios.first?["outcome"] == .string("would_act") && ios.first?["action"] == .string("halt"))
            #expect(ios.first?["version"] == .string("2.0.0"))
            #expect(ios.first?["summary"]?.stringValue?.contains("30 of 100 installs exited within 72 h") == true, "\(ios)")
            #expect(try await !paused("ios"))
            // Android: 1.0 has no abnormal exit on record, so 2.0 has no baseline and is never halted.
            let android = try await records("android")
            #expect(android.first?["outcome"] == .string("idle"))
            #expect(android.first?["summary"]?.stringValue?.hasSuffix("no baseline") == true, "\(android)")
            #expect(try await !paused("android"))
            try await evaluate()
            #expect(try await records("ios").count == ios.count, "a dry run records once per change")

            // Live, it halts 2.0, as a catalog write of its own naming the figures and the backtest.
            try await put("ios", threshold.merging(["state": .string("live")]) { $1 }, revision: 1)
            try await evaluate()
            #expect(try await paused("ios"))
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let halt = history["entries"]?.arrayValue?.first { $0["actor"] == .string("rule:crash-guard") }
            #expect(halt?["changes"]?["rolloutPaused"] == .object(["from": .bool(false), "to": .bool(true)]))
            let reason = halt?["reason"]?.stringValue ?? ""
            #expect(reason.contains("30 of 100 installs exited") && reason.contains("backtest over 7 days"), "\(reason)")
            ios = try await records("ios")
            #expect(ios.first?["outcome"] == .string("acted"))

            // A person resumes it: the rule stands aside, however long it keeps seeing the regression ...
            let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key)
            let resumed = try await server.send(
                .PATCH, "/v1/apps/expenses/releases/ios/2.0", key: key,
                json: .object(["rolloutPaused": .bool(false), "reason": .string("false alarm")]),
                headers: [("If-Match", release.etag ?? "")])
            #expect(resumed.status == 200)
            try await evaluate()
            try await evaluate()
            #expect(try await !paused("ios"), "a rule never undoes a person")
            ios = try await records("ios")
            #expect(ios.first?["outcome"] == .string("stands_aside"))
            #expect(ios.first?["summary"]?.stringValue?.contains("; owner") == true, "\(ios)")
            #expect(ios.first?["summary"]?.stringValue?.contains("changed rolloutPaused at 2026-06-01T") == true, "\(ios)")
            // ... until the rule is written again.
            try await put("ios", threshold.merging(["state": .string("live"), "minimumInstalls": .number(40)]) { $1 }, revision: 2)
            try await evaluate()
            #expect(try await paused("ios"))
        }
    }

    @Test func aRaiseWaitsForItsBoundsRaisesOnceAdoptionAllowsAndStandsAsideForAPerson() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run(Self.configuration(harness)) { server in
            let key = harness.adminKey
            try await Self.release(server, harness, ("1.0", "2026-04-01T00:00:00Z"), ("2.0", "2026-06-01T11:00:00Z"))
            func put(_ forced: Int, revision: Int) async throws {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/raise-2", key: key,
                    json: .object([
                        "kind": .string("raise_minimum"), "version": .string("2.0"), "share": .number(0.9),
                        "windowDays": .number(1), "maximumForced": .number(JSONNumber(forced)), "state": .string("live"),
                    ]), headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200, "\(reply.text)")
            }
            func minimum() async throws -> JSONValue? {
                try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: key).value()["minimumVersion"]
            }
            // At most 5 forced: the 5 installs left on 1.0 are too many.
            try await put(5, revision: 0)
            harness.clock.advance(by: 2 * 3_600)
            var events: [[String: String]] = []
            for index in 0..<100 {
                events += Self.day(
                    UUID().uuidString, platform: "ios", version: index < 95 ? "2.0" : "1.0", at: harness.clock.now(), exits: false)
            }
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            // Two hours after 2.0 came out at 100 %: it has not been out to everyone for a day yet.
            try await Self.evaluate(server, harness)
            #expect(try await minimum() == nil)
            // A day on, 2.0 has been out for a day, but 5 would be forced.
            harness.clock.advance(by: 23 * 3_600)
            try await Self.evaluate(server, harness)
            #expect(try await minimum() == nil)

            // Allowed 10: it raises, as a write of its own naming the figures and the backtest.
            try await put(10, revision: 1)
            try await Self.evaluate(server, harness)
            #expect(try await minimum() == .string("2.0"))
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let raise = history["entries"]?.arrayValue?.first { $0["actor"] == .string("rule:raise-2") }
            let reason = raise?["reason"]?.stringValue ?? ""
            #expect(reason.contains("95 of 100 active installs (95.0 %) at or above; 5 would be forced"), "\(reason)")
            #expect(reason.contains("backtest over 7 days: 5 of 100 installs answered differently, 0 → 5 forced"), "\(reason)")

            // A person takes the minimum back: the rule does not raise it again.
            let policy = try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: key)
            let lowered = try await server.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "reason": .string("support asked for a week more")]),
                headers: [("If-Match", policy.etag ?? "")])
            #expect(lowered.status == 200)
            try await Self.evaluate(server, harness)
            try await Self.evaluate(server, harness)
            #expect(try await minimum() == nil, "a rule never undoes a person")
            let records = try await server.send(.GET, "/v1/apps/expenses/rules/ios/raise-2/records", key: key).value()
            #expect(records["records"]?.arrayValue?.first?["outcome"] == .string("stands_aside"), "\(records)")
            #expect(records["records"]?.arrayValue?.first?["summary"]?.stringValue?.contains("changed minimumVersion") == true)
        }
    }

    @Test func aPromptRuleHaltsAReleaseTooManySkip() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run(Self.configuration(harness)) { server in
            let key = harness.adminKey
            try await Self.release(server, harness, ("1.0", "2026-04-01T00:00:00Z"), ("2.0", "2026-05-30T00:00:00Z"))
            // 50 installs on 1.0 shown a soft prompt for 2.0; 20 of them (40 %) skip it.
            try await Self.prompted(server, harness, installs: 50, skipping: 20)
            try await harness.waitForProjections()
            for (rate, revision) in [(0.5, 0), (0.3, 1)] {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/skips", key: key,
                    json: .object([
                        "kind": .string("halt_on_prompts"), "skipRate": .number(JSONNumber(rate)), "minimumInstalls": .number(50),
                        "state": .string("live"),
                    ]), headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200)
                if rate < 0.4 {
                    // The action and its record are one transaction: while the record cannot be written, the
                    // release is not halted either.
                    try await harness.sql { client in
                        _ = try await client.query(
                            """
                            CREATE FUNCTION refuse_acted() RETURNS trigger LANGUAGE plpgsql AS $$
                            BEGIN IF NEW.outcome = 'acted' THEN RAISE EXCEPTION 'refused by the test'; END IF; RETURN NEW; END $$
                            """)
                        _ = try await client.query(
                            "CREATE TRIGGER refuse_acted BEFORE INSERT ON rule_records FOR EACH ROW EXECUTE FUNCTION refuse_acted()")
                    }
                    try await Self.evaluate(server, harness)
                    let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
                    #expect(release["rolloutPaused"] == .bool(false), "halted without its record")
                    try await harness.sql { client in
                        _ = try await client.query("DROP TRIGGER refuse_acted ON rule_records")
                    }
                }
                try await Self.evaluate(server, harness)
                let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
                #expect(release["rolloutPaused"] == .bool(rate < 0.4), "skip rate 40 % against \(rate)")
            }
            let records = try await server.send(.GET, "/v1/apps/expenses/rules/ios/skips/records", key: key).value()
            let acted = records["records"]?.arrayValue?.first { $0["version"] == .string("2.0.0") }
            #expect(acted?["outcome"] == .string("acted"))
            #expect(acted?["summary"]?.stringValue?.hasPrefix("skips: 50 installs prompted: 20 skipped it (40.0 %)") == true, "\(records)")
        }
    }

    /// `unfinishedRate`: among the installs that started updating to a release, the share with no `updated`
    /// recorded within 24 hours of the start's recording. A start is judged only once its 24 hours have
    /// passed by the application's clock and by the newest event the projection applied.
    @Test func aPromptRuleHaltsAReleaseWhoseStartedUpdatesDoNotFinish() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run(Self.configuration(harness)) { server in
            let key = harness.adminKey
            try await Self.release(server, harness, ("1.0", "2026-04-01T00:00:00Z"), ("2.0", "2026-05-30T00:00:00Z"))
            let installs = (0..<40).map { _ in UUID().uuidString }
            func events(_ type: String, version: String, _ extra: [String: String], for installs: ArraySlice<String>) -> [[String: String]] {
                installs.map { install in
                    [
                        "id": UUID().uuidString, "type": type, "installId": install, "platform": "ios", "appVersion": version,
                        "occurredAt": Timestamp.format(harness.clock.now()),
                    ].merging(extra) { $1 }
                }
            }
            // 40 start updating to 2.0; 10 run it 2 hours later, 5 more only after 30 hours.
            let started = events("update_started", version: "1.0", ["promptKind": "soft", "targetVersion": "2.0"], for: installs[...])
            #expect(try await server.postEvents(started, key: harness.ingestKey).status == 200)
            harness.clock.advance(by: 2 * 3_600)
            let soon = events("updated", version: "2.0", ["fromVersion": "1.0"], for: installs[0..<10])
            #expect(try await server.postEvents(soon, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            let reply = try await server.send(
                .PUT, "/v1/apps/expenses/rules/ios/unfinished", key: key,
                json: .object([
                    "kind": .string("halt_on_prompts"), "unfinishedRate": .number(0.5), "minimumInstalls": .number(40),
                    "state": .string("live"),
                ]), headers: [("If-Match", "\"0\"")])
            #expect(reply.status == 200, "\(reply.text)")
            try await Self.evaluate(server, harness)
            var release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
            #expect(release["rolloutPaused"] == .bool(false), "no start is 24 hours old yet")
            harness.clock.advance(by: 28 * 3_600)
            let late = events("updated", version: "2.0", ["fromVersion": "1.0"], for: installs[10..<15])
            #expect(try await server.postEvents(late, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            try await Self.evaluate(server, harness)
            release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
            #expect(release["rolloutPaused"] == .bool(true), "30 of 40 (75 %) unfinished against 50 %")
            let records = try await server.send(.GET, "/v1/apps/expenses/rules/ios/unfinished/records", key: key).value()
            let acted = records["records"]?.arrayValue?.first { $0["outcome"] == .string("acted") }
            #expect(
                acted?["summary"]?.stringValue?.contains("40 started updating 24 h ago or more: 30 had not updated 24 h later (75.0 %)")
                    == true, "\(records)")
        }
    }

    /// An advance rule holds a schedule's due step while a halting rule (here a dry run) finds the release
    /// outside its thresholds, says why in the history, applies the step once it is within them with the
    /// later steps moved back by the time held; and a live halt wins over it.
    @Test func anAdvanceRuleHoldsADueStepUntilTheSignalsAreWithinThresholdsAndAHaltWins() async throws {
        let harness = try await Harness.make(now: Self.start)
        let blocked = Mutex(false)
        var configuration = Self.configuration(harness)
        configuration.projections.beforeCommit = { name in
            if name == "prompt_funnel", blocked.withLock({ $0 }) { throw HarnessError("prompt_funnel held back by the test") }
        }
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            try await Self.release(server, harness, ("1.0", "2026-04-01T00:00:00Z"))
            try await Self.releaseOnAnHourlySchedule(server, harness)
            try await Self.prompted(server, harness, installs: 50, skipping: 20)
            try await harness.waitForProjections()
            func put(_ id: String, _ body: [String: JSONValue], revision: Int) async throws {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/\(id)", key: key, json: .object(body), headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200, "\(reply.text)")
            }
            func skips(_ rate: Double, state: String, revision: Int) async throws {
                try await put(
                    "skips", ["kind": .string("halt_on_prompts"), "skipRate": .number(JSONNumber(rate)), "minimumInstalls": .number(50),
                              "state": .string(state)], revision: revision)
            }
            func release() async throws -> JSONValue {
                try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
            }
            try await skips(0.3, state: "dry-run", revision: 0)
            try await put("advance", ["kind": .string("advance"), "state": .string("live")], revision: 0)
            // The rules' catalog events applied: the clock's jump below must not make them look an hour late.
            try await harness.waitForProjections()

            // Step 2 comes due an hour in, while 40 % of the prompted installs skip 2.0: held, and the history says why.
            harness.clock.advance(by: 3_600)
            try await Self.evaluate(server, harness)
            var current = try await release()
            #expect(current["rolloutPercent"] == .number(1))
            #expect(current["rolloutSchedule"]?["state"] == .string("held"), "\(current)")
            #expect(current["rolloutSchedule"]?["holdReason"]?.stringValue?.contains("skips: 50 installs prompted: 20 skipped it") == true)
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: key).value()
            let hold = history["entries"]?.arrayValue?.first { $0["schedule"]?["held"] != nil }
            #expect(hold?["actor"] == .string("schedule"))
            #expect(hold?["schedule"]?["held"]?.stringValue?.hasPrefix("advance holds the schedule: skips: ") == true, "\(history)")
            try await Self.evaluate(server, harness)
            #expect(try await release()["rolloutSchedule"]?["state"] == .string("held"), "still held at the next evaluations")

            // While prompt_funnel lags by more than 5 minutes, the advance rule is skipped and its hold stays.
            blocked.withLock { $0 = true }
            try await Self.prompted(server, harness, installs: 1, skipping: 0)
            harness.clock.advance(by: 600)
            try await Self.evaluate(server, harness)
            #expect(try await release()["rolloutSchedule"]?["state"] == .string("held"), "a skip keeps the hold")
            let records = try await server.send(.GET, "/v1/apps/expenses/rules/ios/advance/records", key: key).value()
            let skip = records["records"]?.arrayValue?.first
            #expect(skip?["outcome"] == .string("skipped"))
            #expect(skip?["summary"] == .string("skips: projection prompt_funnel lags by more than 300 s"), "\(records)")
            blocked.withLock { $0 = false }
            try await harness.waitForProjections()

            // At 50 % the skips are within the threshold: the step applies at the next evaluation.
            try await skips(0.5, state: "dry-run", revision: 1)
            let heldFrom = harness.clock.now()
            try await Self.evaluate(server, harness)
            current = try await release()
            #expect(current["rolloutPercent"] == .number(50), "\(current)")
            #expect(current["rolloutSchedule"]?["state"] == .string("running"))
            let held = (current["rolloutSchedule"]?["heldSeconds"]?.doubleValue ?? 0)
            #expect(held >= harness.clock.now().timeIntervalSince(heldFrom), "the time held (\(held) s) moves step 3 back")
            #expect(current["rolloutSchedule"]?["pausedSeconds"] == .number(0), "and is not counted against the pauses")

            // A live halt rule over the threshold halts the release, schedule and all: a halt wins over advance.
            try await skips(0.3, state: "live", revision: 2)
            try await Self.evaluate(server, harness)
            current = try await release()
            #expect(current["rolloutPaused"] == .bool(true) && current["rolloutSchedule"]?["state"] == .string("halted"), "\(current)")
        }
    }

    /// A rule never undoes a person, holds included: once a person resumes a schedule an advance rule held,
    /// the rule stands aside for that release (recorded once) and its due step applies, although the signals
    /// are still outside the thresholds; written again, the rule holds the next due step.
    @Test func anAdvanceRuleStandsAsideForAPersonWhoResumesItsHold() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run(Self.configuration(harness)) { server in
            let key = harness.adminKey
            try await Self.holdTheSecondStep(server, harness)
            func release() async throws -> JSONValue {
                try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: key).value()
            }
            #expect(try await release()["rolloutSchedule"]?["state"] == .string("held"))

            let revision = try #require(try await release()["revision"]?.intValue)
            let resumed = try await server.send(
                .PATCH, "/v1/apps/expenses/releases/ios/2.0", key: key, json: ["rolloutAction": "resume"],
                headers: [("If-Match", "\"\(revision)\"")])
            #expect(resumed.status == 200, "\(resumed.text)")
            try await Self.evaluate(server, harness)
            try await Self.evaluate(server, harness)
            var current = try await release()
            #expect(current["rolloutSchedule"]?["state"] == .string("running"), "held again after a person resumed it: \(current)")
            #expect(current["rolloutPercent"] == .number(50), "\(current)")
            let records = try await server.send(.GET, "/v1/apps/expenses/rules/ios/advance/records", key: key).value()
            let asides = records["records"]?.arrayValue?.filter { $0["outcome"] == .string("stands_aside") } ?? []
            #expect(asides.count == 1, "\(records)")
            #expect(asides.first?["summary"]?.stringValue?.contains("changed rolloutSchedule") == true, "\(records)")

            // Written again (a write that changes nothing is none: to dry-run and back), the rule holds the next
            // due step (100 %, an hour after the 50 %).
            for (state, revision) in [("dry-run", 1), ("live", 2)] {
                let rewritten = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/advance", key: key, json: ["kind": "advance", "state": .string(state)],
                    headers: [("If-Match", "\"\(revision)\"")])
                #expect(rewritten.status == 200, "\(rewritten.text)")
            }
            try await harness.waitForProjections()
            try await Self.evaluate(server, harness)
            harness.clock.advance(by: 3_600)
            try await Self.evaluate(server, harness)
            current = try await release()
            #expect(current["rolloutSchedule"]?["state"] == .string("held") && current["rolloutPercent"] == .number(50), "\(current)")
        }
    }

    /// `installs` installs on 1.0 shown a soft prompt for 2.0 an hour before the start; `skipping` of them skip it.
    static func prompted(_ server: Server, _ harness: Harness, installs: Int, skipping: Int) async throws {
        var events: [[String: String]] = []
        for index in 0..<installs {
            let install = UUID().uuidString
            func event(_ type: String, _ extra: [String: String]) -> [String: String] {
                [
                    "id": UUID().uuidString, "type": type, "installId": install, "platform": "ios", "appVersion": "1.0",
                    "occurredAt": Timestamp.format(start.addingTimeInterval(-3_600)), "targetVersion": "2.0",
                ].merging(extra) { $1 }
            }
            events.append(event("prompt_shown", ["promptKind": "soft"]))
            if index < skipping { events.append(event("prompt_dismissed", ["promptKind": "soft", "dismissAction": "skip"])) }
        }
        #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
    }
}
