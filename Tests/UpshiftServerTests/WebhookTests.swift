import Foundation
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftSimulation
import UpshiftTestSupport

/// Webhooks through `serve` to a receiver the test starts (docs/OPERATIONS.md, "Webhooks"): what a team's
/// receiver gets, how it verifies it with the documented snippet, retries under the application's clock,
/// and the addresses a subscription may not reach.
@Suite(.serverTimeLimit) struct WebhookTests {
    /// Host names the tests' resolver answers, as the test sets them.
    final class Names: Sendable {
        private let table = Mutex<[String: [String]]>([:])
        func set(_ name: String, _ addresses: [String]) { table.withLock { $0[name] = addresses } }
        func resolve(_ name: String) throws -> [String] {
            guard let found = table.withLock({ $0[name] }) else { throw HarnessError("\(name) does not resolve") }
            return found
        }
    }

    static func configuration(_ harness: Harness, names: Names, allowPrivate: Bool) -> AppConfiguration {
        var configuration = harness.configuration()
        configuration.webhooks.allowHTTP = true
        configuration.webhooks.allowPrivate = allowPrivate
        configuration.webhooks.interval = .milliseconds(100)
        configuration.webhooks.resolve = { try names.resolve($0) }
        return configuration
    }

    static func subscribe(_ server: Server, _ harness: Harness, url: String, kinds: [String]) async throws -> Server.Reply {
        try await server.send(
            .POST, "/v1/apps/expenses/webhooks", key: harness.adminKey,
            json: .object(["url": .string(url), "kinds": .array(kinds.map(JSONValue.string))]))
    }

    /// Subscribes `http://hooks.example.test:<port>/hook` to `policy.changed` and writes a policy, whose
    /// delivery is then on its way: the subscription's id.
    static func subscribeToAPolicyWrite(_ server: Server, _ harness: Harness, port: Int) async throws -> String {
        let created = try await subscribe(server, harness, url: "http://hooks.example.test:\(port)/hook", kinds: ["policy.changed"])
        let id = try #require(try created.value()["id"]?.stringValue)
        let policy = try await server.send(
            .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
            json: .object(["enabled": .bool(true), "minimumVersion": .string("1.0.0")]), headers: [("If-Match", "\"0\"")])
        #expect(policy.status == 200)
        return id
    }

    /// The documented Python verification (the first `python` block of the section "Webhooks" of
    /// docs/OPERATIONS.md), run on what the receiver got: whether it accepts it.
    static func pythonVerifies(secret: String, header: String, body: Data) async throws -> Bool {
        let text = try String(
            contentsOf: TestEnvironment.packageRoot.appendingPathComponent("docs/OPERATIONS.md"), encoding: .utf8)
        let section = try #require(text.range(of: "\n## Webhooks\n")).upperBound
        let start = try #require(text.range(of: "```python\n", range: section..<text.endIndex)).upperBound
        let end = try #require(text.range(of: "\n```", range: start..<text.endIndex)).lowerBound
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = folder.appendingPathComponent("verify.py")
        try String(text[start..<end]).write(to: script, atomically: true, encoding: .utf8)
        let input = folder.appendingPathComponent("body")
        try body.write(to: input)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "exec python3 \"$0\" \"$1\" \"$2\" < \"$3\"", script.path, secret, header, input.path]
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// Whether `body` is valid under the schema `name` of docs/openapi.yaml, as check-jsonschema (the JSON
    /// Schema validator scripts/test installs) judges it.
    static func matchesSpec(_ body: Data, schema name: String) async throws -> Bool {
        let root = TestEnvironment.packageRoot
        let validator = root.appendingPathComponent(".fuzz/workflows/bin/check-jsonschema")
        guard FileManager.default.isExecutableFile(atPath: validator.path) else {
            Issue.record("no \(validator.path): scripts/test installs it")
            return false
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webhook-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let schema = folder.appendingPathComponent("schema.json")
        let spec = root.appendingPathComponent("docs/openapi.yaml").absoluteString
        try Data(#"{"$ref": "\#(spec)#/components/schemas/\#(name)"}"#.utf8).write(to: schema)
        let instance = folder.appendingPathComponent("body.json")
        try body.write(to: instance)
        let process = Process()
        process.executableURL = validator
        process.arguments = ["--schemafile", schema.path, instance.path]
        process.standardOutput = FileHandle.nullDevice  // the verdict is the exit status; some bodies must fail
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus == 0
    }

    /// A release written through the API reaches a subscription to `release.changed` as a signed JSON POST
    /// that the documented Python snippet accepts (and refuses once a byte changes); a policy write does not
    /// reach it. The secret is shown at creation only; after a rotation both secrets sign for a day.
    @Test func aReleaseReachesItsSubscriberSignedAsTheDocsVerifyIt() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: true)) { server in
                let url = "http://hooks.example.test:\(receiver.port)/hook"
                let created = try await Self.subscribe(server, harness, url: url, kinds: ["release.changed"])
                #expect(created.status == 201, "\(created.text)")
                #expect(try await Self.matchesSpec(created.body, schema: "WebhookWithSecret"), "\(created.text)")
                let secret = try #require(try created.value()["secret"]?.stringValue)
                let id = try #require(try created.value()["id"]?.stringValue)
                let shown = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)", key: harness.adminKey)
                #expect(shown.status == 200 && !shown.text.contains(secret), "\(shown.text)")
                #expect(try await Self.matchesSpec(shown.body, schema: "Webhook"), "\(shown.text)")
                #expect(try await !Self.matchesSpec(created.body, schema: "Webhook"), "a secret is not part of a Webhook")
                #expect(try shown.value()["url"] == .string(url) && shown.value()["enabled"] == .bool(true), "\(shown.text)")
                #expect(try await !server.send(.GET, "/v1/apps/expenses/webhooks", key: harness.adminKey).text.contains(secret))
                #expect(try await server.send(.GET, "/v1/apps/expenses/webhooks", key: harness.readKey).status == 403)

                let policy = try await server.send(
                    .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                    json: .object(["enabled": .bool(true), "minimumVersion": .string("1.0.0")]), headers: [("If-Match", "\"0\"")])
                #expect(policy.status == 200)
                let release = try await server.send(
                    .POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: DashboardTests.release("2.0"))
                #expect(release.status == 201)
                let got = try await receiver.waitFor(1)[0]
                #expect(got.contentType == "application/json")
                #expect(got.delivery.flatMap(UUID.init(uuidString:)) != nil, "\(String(describing: got.delivery))")
                let body = try JSONValue.parse(got.body)
                #expect(body["kind"] == "release.changed" && body["app"] == "expenses", "\(body)")
                #expect(body["entry"]?["type"] == "release_added" && body["entry"]?["releaseVersion"] == "2.0", "\(body)")
                #expect(body["release"]?["version"] == "2.0")
                #expect(try await Self.matchesSpec(got.body, schema: "WebhookCatalogDelivery"), "\(body)")
                #expect(try await !Self.matchesSpec(Data(#"{"kind":"release.changed"}"#.utf8), schema: "WebhookCatalogDelivery"))
                #expect(!String(decoding: got.body, as: UTF8.self).contains(secret))
                let signature = try #require(got.signature)
                #expect(try await Self.pythonVerifies(secret: secret, header: signature, body: got.body))
                var tampered = got.body
                tampered[tampered.startIndex + 2] ^= 1
                #expect(try await !Self.pythonVerifies(secret: secret, header: signature, body: tampered))
                #expect(try await !Self.pythonVerifies(secret: "whsec_other", header: signature, body: got.body))

                // Rotated: the new secret is shown once, and for a day both sign.
                let rotated = try await server.send(.POST, "/v1/apps/expenses/webhooks/\(id)/rotate", key: harness.adminKey)
                #expect(rotated.status == 200)
                let newSecret = try #require(try rotated.value()["secret"]?.stringValue)
                #expect(newSecret != secret)
                let test = try await server.send(.POST, "/v1/apps/expenses/webhooks/\(id)/test", key: harness.adminKey)
                #expect(test.status == 202, "\(test.text)")
                let second = try await receiver.waitFor(2)[1]
                #expect(try JSONValue.parse(second.body)["kind"] == "webhook.test")
                #expect(try await Self.matchesSpec(second.body, schema: "WebhookTestDelivery"))
                #expect(second.delivery == (try test.value()["delivery"]?.stringValue))
                let header = try #require(second.signature)
                #expect(header.split(separator: ",").filter { $0.hasPrefix("v1=") }.count == 2, "\(header)")
                #expect(try await Self.pythonVerifies(secret: newSecret, header: header, body: second.body))
                #expect(try await Self.pythonVerifies(secret: secret, header: header, body: second.body))
                #expect(receiver.received.count == 2, "the policy write reached a subscription that did not ask for it")
            }
        }
    }

    /// A step that a release's schedule applies when the application's clock reaches it reaches a
    /// subscription to `schedule.step`, with the step and the percent it set; a person's writes do not.
    @Test func aScheduleStepReachesItsSubscriber() async throws {
        let harness = try await Harness.make(now: Timestamp.parse("2026-06-01T00:00:00Z")!)
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: true)) { server in
                let created = try await Self.subscribe(
                    server, harness, url: "http://hooks.example.test:\(receiver.port)/hook", kinds: ["schedule.step"])
                #expect(created.status == 201, "\(created.text)")
                let release = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
                    "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-05-31T23:00:00Z"),
                    "rolloutSchedule": .string("appStore"),
                ]))
                #expect(release.status == 201, "\(release.text)")
                try await Task.sleep(for: .seconds(1))
                #expect(receiver.received.isEmpty, "the release's creation is not a schedule's step")
                harness.clock.advance(by: 86_400 + 60)
                let got = try await receiver.waitFor(1)[0]
                let body = try JSONValue.parse(got.body)
                #expect(body["kind"] == "schedule.step" && body["entry"]?["actor"] == "schedule", "\(body)")
                #expect(body["entry"]?["schedule"]?["percent"] == .number(2) && body["release"]?["rolloutPercent"] == .number(2), "\(body)")
                #expect(try await Self.matchesSpec(got.body, schema: "WebhookCatalogDelivery"), "\(body)")
            }
        }
    }

    /// Runs `serve` with the rules evaluated every `RuleEndpointTests.interval` and a receiver subscribed to `kinds`.
    static func withRules(
        _ harness: Harness, subscribedTo kinds: [String], _ body: @Sendable (Server, WebhookReceiver) async throws -> Void
    ) async throws {
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            var configuration = Self.configuration(harness, names: names, allowPrivate: true)
            configuration.projections.rulesInterval = RuleEndpointTests.interval
            try await harness.run(configuration) { server in
                let created = try await Self.subscribe(server, harness, url: "http://hooks.example.test:\(receiver.port)/hook", kinds: kinds)
                #expect(created.status == 201, "\(created.text)")
                try await body(server, receiver)
            }
        }
    }

    /// A halt-on-prompts rule reaches `rule.would_fire` while it is a dry run and `rule.fired` once live,
    /// each with the figures its record holds.
    @Test func aRuleThatWouldFireAndThenFiresReachesItsSubscriber() async throws {
        let harness = try await Harness.make(now: RuleEndpointTests.start)
        try await Self.withRules(harness, subscribedTo: ["rule.fired", "rule.would_fire"]) { server, receiver in
            try await RuleEndpointTests.release(server, harness, ("1.0", "2026-04-01T00:00:00Z"), ("2.0", "2026-05-30T00:00:00Z"))
            // 50 installs on 1.0 shown a soft prompt for 2.0; 20 of them (40 %) skip it.
            try await RuleEndpointTests.prompted(server, harness, installs: 50, skipping: 20)
            try await harness.waitForProjections()
            for (state, revision, kind, outcome) in [("dry-run", 0, "rule.would_fire", "would_act"), ("live", 1, "rule.fired", "acted")] {
                let rule = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/skips", key: harness.adminKey,
                    json: .object([
                        "kind": .string("halt_on_prompts"), "skipRate": .number(0.3), "minimumInstalls": .number(50),
                        "state": .string(state),
                    ]), headers: [("If-Match", "\"\(revision)\"")])
                #expect(rule.status == 200, "\(rule.text)")
                try await RuleEndpointTests.evaluate(server, harness)
                let got = try await receiver.waitFor(revision + 1)[revision]
                let body = try JSONValue.parse(got.body)
                #expect(body["kind"] == .string(kind) && body["record"]?["outcome"] == .string(outcome), "\(body)")
                #expect(body["record"]?["ruleId"] == "skips" && body["record"]?["version"] == "2.0.0", "\(body)")
                #expect(
                    body["record"]?["summary"]?.stringValue?.hasPrefix("skips: 50 installs prompted: 20 skipped it (40.0 %)") == true,
                    "\(body)")
                #expect(try await Self.matchesSpec(got.body, schema: "WebhookRuleDelivery"), "\(body)")
                // The live rule's action went through the backtest, whose figures it stored and tells.
                let backtest = body["record"]?["summary"]?.stringValue?.contains("; backtest over ") == true
                #expect(backtest == (kind == "rule.fired"), "\(body)")
            }
            #expect(receiver.received.count == 2)
        }
    }

    /// A due step that an advance rule holds, because a halting rule (a dry run) finds 40 % of prompted
    /// installs skipping the release, reaches a subscription to `schedule.step` too, saying why.
    @Test func aStepAnAdvanceRuleHoldsReachesItsSubscriber() async throws {
        let harness = try await Harness.make(now: RuleEndpointTests.start)
        try await Self.withRules(harness, subscribedTo: ["schedule.step"]) { server, receiver in
            try await RuleEndpointTests.holdTheSecondStep(server, harness)
            try await Waits.until("the held step told", timeout: .seconds(120)) {
                receiver.received.contains { (try? JSONValue.parse($0.body)["entry"]?["schedule"]?["held"]) != nil }
            }
            let told = try #require(receiver.received.first { (try? JSONValue.parse($0.body)["entry"]?["schedule"]?["held"]) != nil })
            let body = try JSONValue.parse(told.body)
            #expect(body["kind"] == "schedule.step" && body["entry"]?["actor"] == "schedule", "\(body)")
            #expect(body["entry"]?["schedule"]?["held"]?.stringValue?.hasPrefix("advance holds the schedule: skips: ") == true, "\(body)")
            #expect(body["release"]?["rolloutPercent"] == .number(1), "\(body)")
            #expect(try await Self.matchesSpec(told.body, schema: "WebhookCatalogDelivery"), "\(body)")
        }
    }

    /// `upshift webhooks` as an operator runs it: a URL refused as the server refuses it, naming `--url`; the
    /// secret printed at creation and rotation only; a test delivery queued and listed; a removal.
    @Test func theCLIManagesSubscriptions() async throws {
        let harness = try await Harness.make()
        func upshift(_ arguments: String...) async throws -> (status: Int32, output: String, error: String) {
            let result = try await BinaryTests.command(["webhooks"] + arguments, databaseURL: harness.databaseURL)
            return (result.status, result.output, result.error)
        }
        let refused = try await upshift("create", "--app", "expenses", "--url", "https://127.0.0.1/hook", "--kind", "release.changed")
        #expect(refused.status != 0 && refused.error.contains("--url") && refused.error.contains("loopback"), "\(refused.error)")
        let unknown = try await upshift("create", "--app", "expenses", "--url", "https://93.184.215.14/hook", "--kind", "sideways")
        #expect(unknown.status != 0 && unknown.error.contains("--kind"), "\(unknown.error)")
        let bare = try await upshift("create", "--app", "expenses", "--url", "https://93.184.215.14/hook", "--kind", "adoption.crossed")
        #expect(bare.status != 0 && bare.error.contains("--threshold") && bare.error.contains("required"), "\(bare.error)")
        let over = try await upshift(
            "create", "--app", "expenses", "--url", "https://93.184.215.14/hook", "--kind", "adoption.crossed", "--threshold", "101")
        #expect(over.status != 0 && over.error.contains("--threshold"), "\(over.error)")
        let crossing = try await upshift(
            "create", "--app", "expenses", "--url", "https://93.184.215.14/crossed", "--kind", "adoption.crossed", "--threshold", "90",
            "--threshold", "50.5")
        #expect(crossing.status == 0 && crossing.output.contains(" adoption.crossed thresholds=50.5,90 json enabled"), "\(crossing.output)")
        let crossingId = try #require(crossing.output.split(separator: " ").first.map(String.init))
        #expect(try await upshift("remove", "--app", "expenses", crossingId).status == 0)

        let created = try await upshift(
            "create", "--app", "expenses", "--url", "https://93.184.215.14/hook", "--kind", "release.changed", "--kind", "policy.changed")
        #expect(created.status == 0, "\(created.error)")
        let lines = created.output.split(separator: "\n")
        let id = try #require(lines.first?.split(separator: " ").first.map(String.init))
        let secret = try #require(lines.last?.split(separator: " ").last.map(String.init))
        #expect(lines.last?.hasPrefix("secret whsec_") == true, "\(created.output)")
        let listed = try await upshift("list", "--app", "expenses")
        #expect(listed.output == "\(id) https://93.184.215.14/hook release.changed,policy.changed json enabled\n", "\(listed.output)")

        let rotated = try await upshift("rotate", "--app", "expenses", id)
        #expect(rotated.status == 0 && rotated.output.contains("secret whsec_") && !rotated.output.contains(secret), "\(rotated.output)")
        let test = try await upshift("test", "--app", "expenses", id)
        let delivery = try #require(test.output.split(separator: " ").dropFirst().first.map(String.init))
        #expect(test.status == 0 && test.output.hasSuffix("pending\n"), "\(test.output)")
        let deliveries = try await upshift("deliveries", "--app", "expenses", id)
        #expect(deliveries.output.hasPrefix("\(delivery) webhook.test pending "), "\(deliveries.output)")

        #expect(try await upshift("remove", "--app", "expenses", id).status == 0)
        #expect(try await upshift("list", "--app", "expenses").output.isEmpty)
        let gone = try await upshift("remove", "--app", "expenses", id)
        #expect(gone.status != 0 && gone.error.contains("no webhook \(id)"), "\(gone.error)")
    }

    /// A subscription in the Slack format gets a Slack incoming webhook's body, unsigned: one line that says
    /// what happened, with a link to the dashboard's page of it under UPSHIFT_PUBLIC_URL.
    @Test func aSlackSubscriptionGetsALineWithALink() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            var configuration = Self.configuration(harness, names: names, allowPrivate: true)
            configuration.webhooks.publicURL = "https://upshift.example.test"
            try await harness.run(configuration) { server in
                let created = try await server.send(
                    .POST, "/v1/apps/expenses/webhooks", key: harness.adminKey,
                    json: .object([
                        "url": .string("http://hooks.example.test:\(receiver.port)/hook"), "kinds": .array(["release.changed"]),
                        "format": .string("slack"),
                    ]))
                let format = try created.value()["format"]
                #expect(created.status == 201 && format == "slack", "\(created.text)")
                let bad = try await server.send(
                    .POST, "/v1/apps/expenses/webhooks", key: harness.adminKey,
                    json: .object(["url": .string("http://hooks.example.test/"), "kinds": .array(["release.changed"]), "format": .string("xml")]))
                let field = try bad.value()["field"]
                #expect(bad.status == 400 && field == "format", "\(bad.text)")
                let release = try await server.send(
                    .POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: DashboardTests.release("2.0"))
                #expect(release.status == 201)
                let got = try await receiver.waitFor(1)[0]
                #expect(got.signature == nil && got.delivery != nil)
                let text = try #require(try JSONValue.parse(got.body)["text"]?.stringValue)
                #expect(text.hasPrefix("expenses ios 2.0: added by "), "\(text)")
                #expect(text.hasSuffix(" <https://upshift.example.test/dashboard/apps/expenses/releases/2.0?platform=ios|open>"), "\(text)")
                #expect(try await Self.matchesSpec(got.body, schema: "WebhookSlackDelivery"), "\(text)")
            }
        }
    }

    /// A receiver that fails twice gets three attempts, each after its backoff by the application's clock,
    /// all with one `Upshift-Delivery`; the deliveries API shows each attempt; 30 days after it ended the
    /// delivery is forgotten.
    @Test func aReceiverThatFailsTwiceGetsThreeAttemptsWithOneDeliveryId() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            receiver.script([500, 503])
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: true)) { server in
                let id = try await Self.subscribeToAPolicyWrite(server, harness, port: receiver.port)
                _ = try await receiver.waitFor(1)
                // Not again before its backoff (30 s ± 20 %) has passed on the application's clock.
                try await Task.sleep(for: .seconds(1))
                #expect(receiver.received.count == 1)
                harness.clock.advance(by: 37)
                _ = try await receiver.waitFor(2)
                try await Task.sleep(for: .seconds(1))
                #expect(receiver.received.count == 2)
                harness.clock.advance(by: 73)
                let all = try await receiver.waitFor(3)
                #expect(Set(all.map(\.delivery)).count == 1, "\(all.map(\.delivery))")
                #expect(try JSONValue.parse(all[0].body)["kind"] == "policy.changed")
                #expect(try await Self.matchesSpec(all[0].body, schema: "WebhookCatalogDelivery"))
                try await Waits.until("the delivery recorded as delivered", timeout: .seconds(120)) {
                    let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                    return try list.value()["deliveries"]?.arrayValue?.first?["state"] == "delivered"
                }
                let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                #expect(try await Self.matchesSpec(list.body, schema: "WebhookDeliveryList"), "\(list.text)")
                let delivery = try #require(try list.value()["deliveries"]?.arrayValue?.first)
                #expect(delivery["id"]?.stringValue == all[0].delivery)
                #expect(delivery["attempts"]?.arrayValue?.map { $0["status"]?.intValue } == [500, 503, 200], "\(list.text)")
                #expect(try await server.metric("upshift_webhook_attempts_total{outcome=\"retry\"}") == 2)
                // Kept 30 days after it ended, then forgotten with its attempts, though nothing else is due.
                harness.clock.advance(by: 29 * 86_400)
                try await Task.sleep(for: .seconds(1))
                #expect(try await harness.count("SELECT count(*)::int8 FROM webhook_deliveries") == 1)
                harness.clock.advance(by: 86_400 + 60)
                try await Waits.until("the delivery forgotten", timeout: .seconds(60)) {
                    try await harness.count("SELECT (SELECT count(*) FROM webhook_attempts) + (SELECT count(*) FROM webhook_deliveries)") == 0
                }
            }
        }
    }

    /// What bounds one attempt: a redirect is an answer, not followed (the receiver gets no second request)
    /// and tried again; an answer slower than the attempt's bound is a timeout, tried again; an answer of a
    /// MiB counts as delivered (at most 64 KiB of it is read). Each attempt says which it was.
    @Test func anAttemptIsHeldToItsBounds() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            receiver.script([307])
            receiver.hold([.zero, .seconds(15)])
            var configuration = Self.configuration(harness, names: names, allowPrivate: true)
            configuration.webhooks.timeout = .seconds(5)  // a third of the hold; the other answers come at once
            try await harness.run(configuration) { server in
                let id = try await Self.subscribeToAPolicyWrite(server, harness, port: receiver.port)
                func attempts() async throws -> [JSONValue] {
                    let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                    return try list.value()["deliveries"]?.arrayValue?.first?["attempts"]?.arrayValue ?? []
                }
                _ = try await receiver.waitFor(1)
                try await Waits.until("the redirect recorded", timeout: .seconds(120)) { try await attempts().count == 1 }
                #expect(receiver.received.count == 1, "the redirect was followed")
                receiver.answer(bytes: 1 << 20)
                harness.clock.advance(by: 37)
                try await Waits.until("the slow answer recorded", timeout: .seconds(120)) { try await attempts().count == 2 }
                harness.clock.advance(by: 73)
                try await Waits.until("the long answer recorded", timeout: .seconds(120)) { try await attempts().count == 3 }
                let recorded = try await attempts()
                #expect(recorded.map { $0["status"]?.intValue } == [307, nil, 200], "\(recorded)")
                #expect(recorded[0]["error"]?.stringValue?.contains("redirects are not followed") == true, "\(recorded)")
                #expect(recorded[1]["error"]?.stringValue == "timed out", "\(recorded)")
                #expect(receiver.received.count == 3 && Set(receiver.received.map(\.delivery)).count == 1)
            }
        }
    }

    /// Without UPSHIFT_WEBHOOK_ALLOW_HTTP a subscription is `https` only; every refused range is refused by
    /// name, a name with one refused address among public ones too, and the addresses just outside them are
    /// taken. An app has at most 20 subscriptions, also when they are asked for at once.
    @Test func aSubscriptionIsHTTPSToPublicAddressesAndAnAppHasAtMostTwenty() async throws {
        let harness = try await Harness.make()
        let names = Names()
        names.set("hooks.example.test", ["93.184.215.14"])
        names.set("mixed.example.test", ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c", "10.0.0.7"])
        var configuration = Self.configuration(harness, names: names, allowPrivate: false)
        configuration.webhooks.allowHTTP = false
        try await harness.run(configuration) { server in
            let plain = try await Self.subscribe(server, harness, url: "http://hooks.example.test/hook", kinds: ["release.changed"])
            #expect(plain.status == 400 && plain.text.contains("UPSHIFT_WEBHOOK_ALLOW_HTTP"), "\(plain.text)")
            #expect(try plain.value()["field"] == "url")
            for (host, range) in [
                ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("172.31.255.255", "private"), ("192.168.0.1", "private"),
                ("100.64.0.1", "100.64/10"), ("100.127.255.254", "100.64/10"), ("[fc00::1]", "fc00::/7"),
                ("[fd12:3456::1]", "fc00::/7"), ("[fe80::1]", "link-local"), ("169.254.169.254", "link-local"),
                ("0.0.0.0", "unspecified"), ("[::]", "unspecified"), ("224.0.0.1", "multicast"), ("[ff02::1]", "multicast"),
                ("240.0.0.1", "reserved"), ("127.0.0.1", "loopback"), ("[::1]", "loopback"), ("[::ffff:10.0.0.1]", "IPv4-mapped"),
                ("mixed.example.test", "10.0.0.7, a private"),
            ] {
                let reply = try await Self.subscribe(server, harness, url: "https://\(host)/hook", kinds: ["release.changed"])
                let (field, detail) = (try reply.value()["field"], try reply.value()["detail"]?.stringValue ?? "")
                #expect(reply.status == 400 && field == "url" && detail.contains(range), "\(host): \(reply.text)")
            }
            for host in ["172.32.0.1", "100.128.0.1", "192.169.0.1", "[2606:4700::1111]"] {
                let reply = try await Self.subscribe(server, harness, url: "https://\(host)/hook", kinds: ["release.changed"])
                #expect(reply.status == 201, "\(host): \(reply.text)")
            }
            let statuses = try await withThrowingTaskGroup(of: Server.Reply.self) { group in
                for index in 0..<20 {
                    group.addTask {
                        try await Self.subscribe(server, harness, url: "https://hooks.example.test/\(index)", kinds: ["release.changed"])
                    }
                }
                return try await group.reduce(into: [Server.Reply]()) { $0.append($1) }
            }
            #expect(statuses.filter { $0.status == 201 }.count == 16)
            let refused = statuses.filter { $0.status != 201 }
            #expect(refused.count == 4 && refused.allSatisfy { $0.status == 400 && $0.text.contains("at most 20") }, "\(refused.map(\.text))")
            let list = try await server.send(.GET, "/v1/apps/expenses/webhooks", key: harness.adminKey)
            #expect(try list.value()["webhooks"]?.arrayValue?.count == 20, "\(list.text)")
        }
    }

    /// Without UPSHIFT_WEBHOOK_ALLOW_PRIVATE, a URL whose host resolves to loopback is refused at creation,
    /// naming the field; one that resolved elsewhere at creation and to loopback later (DNS rebinding) is
    /// refused at delivery, recorded, and never reached. Bad fields are `400` naming them.
    @Test func aPrivateAddressIsRefusedAtCreationAndAtDelivery() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("loopback.example.test", ["127.0.0.1"])
            names.set("rebinding.example.test", ["93.184.215.14"])
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: false)) { server in
                let refused = try await Self.subscribe(
                    server, harness, url: "http://loopback.example.test:\(receiver.port)/hook", kinds: ["release.changed"])
                #expect(refused.status == 400 && refused.text.contains("loopback"), "\(refused.text)")
                #expect(try refused.value()["field"] == "url")
                for (url, kinds, field) in [
                    ("http://[::ffff:127.0.0.1]/hook", ["release.changed"], "url"),
                    ("http://169.254.169.254/latest", ["release.changed"], "url"),
                    ("ftp://hooks.example.test/", ["release.changed"], "url"),
                    ("http://user:pw@rebinding.example.test/", ["release.changed"], "url"),
                    ("http://rebinding.example.test/", ["adoption.sideways"], "kinds"),
                    ("http://rebinding.example.test/", [], "kinds"),
                ] {
                    let reply = try await Self.subscribe(server, harness, url: url, kinds: kinds)
                    let named = try reply.value()["field"]
                    #expect(reply.status == 400 && named == .string(field), "\(url) \(kinds): \(reply.text)")
                }

                // Thresholds: only with adoption.crossed, required with it, each a percent in (0, 100].
                let url = "http://rebinding.example.test/hook"
                for (kinds, thresholds) in [
                    (#"["adoption.crossed"]"#, nil), (#"["release.changed"]"#, "[50]"), (#"["adoption.crossed"]"#, "[]"),
                    (#"["adoption.crossed"]"#, "[0]"), (#"["adoption.crossed"]"#, "[100.5]"), (#"["adoption.crossed"]"#, "[-10]"),
                    (#"["adoption.crossed"]"#, "[50, 50]"), (#"["adoption.crossed"]"#, #"["50"]"#), (#"["adoption.crossed"]"#, "[1e400]"),
                    (#"["adoption.crossed"]"#, "[33.333]"), (#"["adoption.crossed"]"#, "50"),
                    (#"["adoption.crossed"]"#, "[" + (1...11).map(String.init).joined(separator: ",") + "]"),
                    (#"["adoption.crossed"]"#, #"["\u0000"]"#), (#"["adoption.crossed"]"#, #"[""# + String(repeating: "9", count: 3_000) + #""]"#),
                    (#"["adoption.crossed"]"#, "[" + String(repeating: "9", count: 3_000) + "]"),
                    (#"["adoption.crossed"]"#, #"[50], "thresholds": [50, 90]"#),
                ] as [(String, String?)] {
                    let body = #"{"url": "\#(url)", "kinds": \#(kinds)"# + (thresholds.map { #", "thresholds": \#($0)"# } ?? "") + "}"
                    let reply = try await server.request(
                        .POST, "/v1/apps/expenses/webhooks",
                        headers: [("Authorization", "Bearer \(harness.adminKey)"), ("Content-Type", "application/json")],
                        body: Data(body.utf8))
                    #expect(reply.status == 400 && (try? reply.value())?["field"] == "thresholds", "\(body): \(reply.text)")
                }

                // Hostile bodies: wrong types, a huge number, NUL, an over-long URL, a member sent twice.
                for body in [
                    #"{"url": 1e400, "kinds": ["release.changed"]}"#, #"{"url": "http://a.test/", "kinds": "release.changed"}"#,
                    #"{"url": "http://a.test/\u0000", "kinds": ["release.changed"]}"#,
                    #"{"url": "http://a.test/"# + String(repeating: "a", count: 3_000) + #"", "kinds": ["release.changed"]}"#,
                    #"{"url": "http://a.test/", "kinds": ["release.changed"], "kinds": ["policy.changed"]}"#,
                    #"{"url": "http://a.test/", "kinds": ["release.changed"], "format": 7}"#, #"[]"#,
                ] {
                    let reply = try await server.request(
                        .POST, "/v1/apps/expenses/webhooks",
                        headers: [("Authorization", "Bearer \(harness.adminKey)"), ("Content-Type", "application/json")],
                        body: Data(body.utf8))
                    #expect(reply.status == 400, "\(body.prefix(80)): \(reply.text)")
                }

                let created = try await Self.subscribe(
                    server, harness, url: "http://rebinding.example.test:\(receiver.port)/hook", kinds: ["release.changed"])
                #expect(created.status == 201, "\(created.text)")
                let id = try #require(try created.value()["id"]?.stringValue)
                names.set("rebinding.example.test", ["127.0.0.1"])
                #expect(try await server.send(.POST, "/v1/apps/expenses/webhooks/\(id)/test", key: harness.adminKey).status == 202)
                try await Waits.until("the refused attempt recorded", timeout: .seconds(120)) {
                    let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                    return try list.value()["deliveries"]?.arrayValue?.first?["attempts"]?.arrayValue?.isEmpty == false
                }
                let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                #expect(try await Self.matchesSpec(list.body, schema: "WebhookDeliveryList"), "\(list.text)")
                let attempt = try #require(try list.value()["deliveries"]?.arrayValue?.first?["attempts"]?.arrayValue?.first)
                #expect(attempt["status"] == nil && attempt["error"]?.stringValue?.contains("loopback") == true, "\(list.text)")
                #expect(receiver.received.isEmpty)
            }
        }
    }

    /// A subscription whose attempts all fail for a day is disabled, saying why, and gets nothing more until
    /// it is enabled again.
    @Test func aSubscriptionFailingForADayIsDisabledUntilEnabled() async throws {
        let harness = try await Harness.make()
        let names = Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            receiver.script(Array(repeating: 500, count: 1_000))
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: true)) { server in
                let created = try await Self.subscribe(
                    server, harness, url: "http://hooks.example.test:\(receiver.port)/hook", kinds: ["release.changed"])
                let id = try #require(try created.value()["id"]?.stringValue)
                let path = "/v1/apps/expenses/webhooks/\(id)"
                #expect(try await server.send(.POST, path + "/test", key: harness.adminKey).status == 202)
                _ = try await receiver.waitFor(1)
                harness.clock.advance(by: 25 * 3_600)
                #expect(try await server.send(.POST, path + "/test", key: harness.adminKey).status == 202)
                try await Waits.until("the subscription disabled", timeout: .seconds(120)) {
                    try await server.send(.GET, path, key: harness.adminKey).value()["enabled"] == .bool(false)
                }
                let shown = try await server.send(.GET, path, key: harness.adminKey).value()
                #expect(shown["disabledReason"]?.stringValue?.contains("status 500") == true, "\(shown)")
                // The first test event, a day old at its last attempt, failed for good.
                let list = try await server.send(.GET, path + "/deliveries", key: harness.adminKey)
                let states = try list.value()["deliveries"]?.arrayValue?.map { $0["state"]?.stringValue } ?? []
                #expect(states.contains("failed"), "\(list.text)")
                let before = receiver.received.count
                #expect(try await server.send(.POST, path + "/test", key: harness.adminKey).status == 202)
                try await Task.sleep(for: .seconds(1))
                #expect(receiver.received.count == before)
                receiver.script([])
                let enabled = try await server.send(.POST, path + "/enable", key: harness.adminKey)
                #expect(try enabled.value()["enabled"] == .bool(true))
                _ = try await receiver.waitFor(before + 1)
            }
        }
    }

    /// A simulated fleet (the project's fleet model: 240 installs updating through 1.0.0, 1.1.0 and 1.2.0 over
    /// two weeks) posted day by day under the application's clock: each threshold of each release is told
    /// once, only after its day closed, on the first day whose share of active installs on the release or
    /// newer reached it in the adoption report (computed here from the report's counts), and a threshold no
    /// day reached is never told.
    @Test func adoptionCrossingsAreToldOnceOnTheDayTheReportSays() async throws {
        let first = Timestamp.parse("2026-06-01T00:00:00Z")!
        let days = 14
        let harness = try await Harness.make(now: first.addingTimeInterval(-3_600))
        let names = Names()
        var random = SplitMix64(seed: 11)
        let fleet = FleetModel.events(
            installs: 240, days: days, versions: ["1.0.0", "1.1.0", "1.2.0"], promptOneIn: 3, random: &random
        ) { back, random in
            first.addingTimeInterval(Double(days - 1 - back) * 86_400 + Double(random.next() % 80_000))
        }.filter { !$0.late }
        let thresholds: [Double] = [10, 25, 50, 99]
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            try await harness.run(Self.configuration(harness, names: names, allowPrivate: true)) { server in
                try await RuleEndpointTests.release(
                    server, harness, ("1.0.0", "2026-05-01T00:00:00Z"), ("1.1.0", "2026-06-01T00:00:00Z"), ("1.2.0", "2026-06-05T00:00:00Z"))
                let created = try await server.send(
                    .POST, "/v1/apps/expenses/webhooks", key: harness.adminKey,
                    json: .object([
                        "url": .string("http://hooks.example.test:\(receiver.port)/hook"), "kinds": .array(["adoption.crossed"]),
                        "thresholds": .array(thresholds.map { .number(JSONNumber($0)) }),
                    ]))
                #expect(created.status == 201, "\(created.text)")
                #expect(try created.value()["thresholds"] == .array([10, 25, 50, 99]), "\(created.text)")
                for day in 0..<days {
                    let start = first.addingTimeInterval(Double(day) * 86_400)
                    // Day `day` is open (and the days before it closed): its events are posted and applied.
                    harness.clock.set(start.addingTimeInterval(86_399))
                    let events = fleet.filter { $0.at >= start && $0.at < start.addingTimeInterval(86_400) }.map(\.posted)
                    for part in stride(from: 0, to: events.count, by: 500) {
                        let reply = try await server.postEvents(Array(events[part..<min(part + 500, events.count)]), key: harness.ingestKey)
                        #expect(reply.status == 200, "\(reply.text)")
                    }
                    try await harness.waitForProjections()
                    let open = UTCDay(start).description
                    for got in receiver.received {
                        let told = try JSONValue.parse(got.body)["day"]?.stringValue ?? ""
                        #expect(told < open, "\(told) was told while \(open) was open")
                    }
                }
                harness.clock.set(first.addingTimeInterval(Double(days) * 86_400 + 60))

                // What the adoption report says: the first day on or after each release's own whose share of
                // active installs on it or newer reached each threshold.
                let report = try await server.send(
                    .GET, "/v1/apps/expenses/reports/adoption?platform=ios&from=2026-06-01&to=2026-06-14", key: harness.readKey)
                var expected: [String: String] = [:]  // "version threshold" → day
                for (version, released) in [("1.0.0", "2026-05-01"), ("1.1.0", "2026-06-01"), ("1.2.0", "2026-06-05")] {
                    let release = try #require(Version(version))
                    for day in try report.value()["days"]?.arrayValue ?? [] {
                        let name = day["day"]?.stringValue ?? ""
                        let active = day["activeInstalls"]?.doubleValue ?? 0
                        guard name >= released, active > 0 else { continue }
                        let on = (day["versions"]?.arrayValue ?? []).reduce(0) { sum, cell in
                            let newer = Version(cell["version"]?.stringValue ?? "").map { $0 >= release } ?? false
                            return sum + (newer ? Int(cell["installs"]?.doubleValue ?? 0) : 0)
                        }
                        for threshold in thresholds where expected["\(version) \(threshold)"] == nil && 100 * Double(on) / active >= threshold {
                            expected["\(version) \(threshold)"] = name
                        }
                    }
                }
                #expect(expected.count >= 6, "the fleet crosses a few thresholds: \(expected)")
                #expect(expected.count < 12, "and not every one: \(expected)")
                let got = try await receiver.waitFor(expected.count)
                try await Task.sleep(for: .seconds(2))
                #expect(receiver.received.count == expected.count, "one delivery per threshold and release")
                var told: [String: String] = [:]
                for delivery in got {
                    let body = try JSONValue.parse(delivery.body)
                    #expect(body["kind"] == "adoption.crossed" && body["app"] == "expenses" && body["platform"] == "ios", "\(body)")
                    #expect(try await Self.matchesSpec(delivery.body, schema: "WebhookAdoptionDelivery"), "\(body)")
                    let key = "\(body["version"]?.stringValue ?? "") \(body["threshold"]?.doubleValue ?? -1)"
                    #expect(told[key] == nil, "\(key) told twice")
                    told[key] = body["day"]?.stringValue
                }
                #expect(told == expected)
            }
        }
    }

    /// A health rule whose threshold a release crosses tells `health.regressed` once per rule and release,
    /// whether the rule is off or a dry run, and acts on nothing.
    @Test func aHealthRegressionIsToldOnceWhateverTheRulesState() async throws {
        let harness = try await Harness.make(now: RuleEndpointTests.start)
        try await Self.withRules(harness, subscribedTo: ["health.regressed"]) { server, receiver in
            try await RuleEndpointTests.release(server, harness, ("1.0", "2026-05-04T00:00:00Z"), ("2.0", "2026-05-18T00:00:00Z"))
            // 100 installs on each release's first day: 2 % of 1.0's exit abnormally, 30 % of 2.0's.
            var events: [[String: String]] = []
            for index in 0..<100 {
                events += RuleEndpointTests.day(
                    UUID().uuidString, platform: "ios", version: "1.0", at: Timestamp.parse("2026-05-04T10:00:00Z")!, exits: index < 2)
                events += RuleEndpointTests.day(
                    UUID().uuidString, platform: "ios", version: "2.0", at: Timestamp.parse("2026-05-18T10:00:00Z")!, exits: index < 30)
            }
            for part in stride(from: 0, to: events.count, by: 200) {
                #expect(try await server.postEvents(Array(events[part..<min(part + 200, events.count)]), key: harness.ingestKey).status == 200)
            }
            try await harness.waitForProjections()
            func put(_ id: String, _ state: String, revision: Int) async throws {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/rules/ios/\(id)", key: harness.adminKey,
                    json: .object([
                        "kind": .string("halt_on_health"), "mode": .string("threshold"), "excess": .number(0.1),
                        "minimumInstalls": .number(50), "state": .string(state),
                    ]), headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200, "\(reply.text)")
            }
            try await put("crash-guard", "off", revision: 0)
            try await RuleEndpointTests.evaluate(server, harness)
            let off = try await receiver.waitFor(1)[0]
            let body = try JSONValue.parse(off.body)
            #expect(body["kind"] == "health.regressed" && body["rule"] == "crash-guard" && body["state"] == "off", "\(body)")
            #expect(body["version"] == "2.0.0" && body["summary"]?.stringValue?.contains("30 of 100 installs exited") == true, "\(body)")
            #expect(try await Self.matchesSpec(off.body, schema: "WebhookHealthDelivery"), "\(body)")

            // The same rule as a dry run: told already. Another rule: told once, as its own.
            try await put("crash-guard", "dry-run", revision: 1)
            try await put("crash-watch", "dry-run", revision: 0)
            try await RuleEndpointTests.evaluate(server, harness)
            try await RuleEndpointTests.evaluate(server, harness)
            let second = try await receiver.waitFor(2)[1]
            #expect(try JSONValue.parse(second.body)["rule"] == "crash-watch")
            try await Task.sleep(for: .seconds(1))
            #expect(receiver.received.count == 2, "once per rule and release")

            // A guarded rule's test rejects too (a dry run), and says so with its e-value.
            let guarded = try await server.send(
                .PUT, "/v1/apps/expenses/rules/ios/crash-sentinel", key: harness.adminKey,
                json: ["kind": "halt_on_health", "mode": "guarded", "state": "dry-run"], headers: [("If-Match", "\"0\"")])
            #expect(guarded.status == 200, "\(guarded.text)")
            try await RuleEndpointTests.evaluate(server, harness)
            let third = try JSONValue.parse(try await receiver.waitFor(3)[2].body)
            #expect(third["rule"] == "crash-sentinel" && third["state"] == "dry-run", "\(third)")
            #expect(third["summary"]?.stringValue?.contains("e-value") == true, "\(third)")
            let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: harness.adminKey)
            #expect(try release.value()["rolloutPaused"] == .bool(false), "no rule here is live")
        }
    }

    /// `upshift serve`, killed with SIGKILL while a delivery waits out its backoff, sends it again after a
    /// restart: the receiver answers 2xx once, and every request it got carries the one `Upshift-Delivery`.
    @Test func aServerKilledDuringABackoffDeliversAfterItsRestart() async throws {
        let harness = try await Harness.make()
        try await WebhookReceiver.run { receiver in
            receiver.script([500])
            let port = try await freePort()
            let environment = ["UPSHIFT_WEBHOOK_ALLOW_HTTP": "1", "UPSHIFT_WEBHOOK_ALLOW_PRIVATE": "1"]
            var process = try ServerProcess(database: harness.database, port: port, extraEnvironment: environment)
            defer { if process.process.isRunning { process.kill9() } }
            try await process.start()
            let server = Server(port: port)
            let created = try await Self.subscribe(server, harness, url: "http://127.0.0.1:\(receiver.port)/hook", kinds: ["release.changed"])
            #expect(created.status == 201, "\(created.text)")
            let id = try #require(try created.value()["id"]?.stringValue)
            let queued = try await server.send(.POST, "/v1/apps/expenses/webhooks/\(id)/test", key: harness.adminKey)
            let delivery = try #require(try queued.value()["delivery"]?.stringValue)
            func attempts() async throws -> (state: String?, statuses: [JSONValue]) {
                let list = try await server.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey).value()
                let first = list["deliveries"]?.arrayValue?.first
                return (first?["state"]?.stringValue, first?["attempts"]?.arrayValue?.map { $0["status"] ?? .null } ?? [])
            }
            try await Waits.until("the first attempt recorded, a retry pending", timeout: .seconds(60)) {
                try await attempts() == ("pending", [.number(500)])
            }
            process.kill9()
            process = try ServerProcess(database: harness.database, port: port, extraEnvironment: environment)
            try await process.start()
            // The retry is due 24 to 36 s after the first attempt began.
            try await Waits.until("the delivery delivered after the restart", timeout: .seconds(120)) {
                try await attempts() == ("delivered", [.number(500), .number(200)])
            }
            try await Task.sleep(for: .seconds(2))
            #expect(receiver.received.count == 2, "answered 2xx once: nothing sent after")
            #expect(receiver.received.allSatisfy { $0.delivery == delivery }, "\(receiver.received.map(\.delivery))")
            #expect(await process.terminate() == 0)
        }
    }
}
