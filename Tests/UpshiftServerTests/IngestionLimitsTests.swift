import Foundation
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// What `POST /v1/events` takes at most, from whom, and what one id means.
@Suite(.serverTimeLimit) struct IngestionLimitsTests {
    /// `{"events": []}` padded with spaces (valid JSON) to exactly `size` bytes.
    static func padded(_ size: Int) -> Data {
        let open = Data(#"{"events": ["#.utf8), close = Data("]}".utf8)
        return open + Data(repeating: 0x20, count: size - open.count - close.count) + close
    }

    @Test func theMebibyteIsExactAsReceivedAndAfterDecompression() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let mebibyte = 1 << 20
            for (size, status) in [(mebibyte, 200), (mebibyte + 1, 413)] {
                let plain = try await server.postEvents(body: Self.padded(size), key: harness.ingestKey)
                #expect(plain.status == status, "\(size) bytes as received")
                let zipped = try await server.postEvents(
                    body: try gzip(Self.padded(size)), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
                #expect(zipped.status == status, "\(size) bytes after decompression")
            }
            // Between 1 and 1.41 MiB, where the decompression buffer used to round up: refused.
            let zipped = try await server.postEvents(
                body: try gzip(Self.padded(1_400_000)), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
            #expect(zipped.status == 413)
        }
    }

    /// Bodies held at once are bounded server-wide: two gzip posts stalled in their bodies (1 MiB as
    /// received and 1 MiB inflated each) fill a budget of 4 MiB; a third post is `503` with `Retry-After`,
    /// unread, and counted by the budget's metric (no rate limiter's); the check, which has no body, answers
    /// on; once a stalled client goes, posting works again.
    @Test func aFullBodyBudgetAnswers503UnreadAndCountsIt() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.connections.bodyBudgetBytes = 4 << 20
        try await harness.run(configuration) { server in
            let reserved = "upshift_body_budget_reserved_bytes"
            var stalled: [RawConnection] = []
            for _ in 0..<2 {
                let connection = try await RawConnection.open(port: server.port)
                #expect(await connection.send(
                    "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(harness.ingestKey)\r\n"
                        + "Content-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 1048576\r\n\r\n\u{1f}"))
                stalled.append(connection)
            }
            try await Self.waitFor(server, reserved, toBe: 4 << 20)
            let event = [clientEvent(occurredAt: harness.clock.now())]
            let refused = try await server.postEvents(event, key: harness.ingestKey)
            #expect(refused.status == 503)
            #expect(refused.headers["Retry-After"].first == "1")
            #expect(try await server.metric("upshift_body_budget_refused_total") == 1)
            #expect(try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0").status == 200)

            await stalled[0].close()
            try await Self.waitFor(server, reserved, toBe: 2 << 20)
            #expect(try await server.postEvents(event, key: harness.ingestKey).status == 200)
            await stalled[1].close()
        }
    }

    static func waitFor(_ server: Server, _ metric: String, toBe value: Int) async throws {
        try await Waits.until("\(metric) at \(value)", timeout: .seconds(5), every: .milliseconds(20)) {
            try await server.metric(metric) == Double(value)
        }
    }

    @Test func fiveHundredEventsAreTheLimitCountedWhileReading() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            let five = (0..<500).map { _ in clientEvent(occurredAt: now) }
            #expect(try await server.postEvents(five, key: harness.ingestKey).status == 200)
            let six = (0..<501).map { _ in clientEvent(occurredAt: now) }
            let refused = try await server.postEvents(six, key: harness.ingestKey)
            #expect(refused.status == 413)
            #expect(try refused.json()["type"] as? String == "urn:upshift:problem:too-large")
            // A megabyte of zeros, gzipped to about a kilobyte: refused at the 501st element.
            let zeros = Data("{\"events\": [".utf8) + Data(Array(repeating: "0", count: 500_000).joined(separator: ",").utf8)
                + Data("]}".utf8)
            let bomb = try await server.postEvents(
                body: try gzip(zeros), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
            #expect(bomb.status == 413)
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 500)
    }

    /// Per client address and per ingest key, counted in events: `429` past the limit, never before.
    @Test func eachRateLimitAnswers429WhenExceededAndNeverBelow() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        var configuration = harness.configuration()
        // A burst of 600 events and almost no refill: the limit is exact within the test's time.
        configuration.ingestion.ratePerClient = RateLimit(rate: 0.001, burst: 600)
        configuration.ingestion.ratePerKey = RateLimit(rate: 0.001, burst: 1_200)
        configuration.trustedProxies = ["127.0.0.1"]
        try await harness.run(configuration) { server in
            func post(_ count: Int, from client: String) async throws -> Server.Reply {
                try await server.postEvents(
                    body: try JSONSerialization.data(withJSONObject: ["events": (0..<count).map { _ in clientEvent(occurredAt: now) }]),
                    key: harness.ingestKey, extraHeaders: [("X-Forwarded-For", client)])
            }
            // One address: 500 + 100 is its burst exactly; one more event is over it.
            #expect(try await post(500, from: "203.0.113.1").status == 200)
            #expect(try await post(100, from: "203.0.113.1").status == 200)
            // Nothing refused yet, nothing counted.
            let byAddress = #"upshift_rate_limited_total{limit="events_client"}"#
            let byKey = #"upshift_rate_limited_total{limit="events_key"}"#
            #expect(try await server.metric(byAddress) == 0)
            #expect(try await server.metric(byKey) == 0)
            let overAddress = try await post(1, from: "203.0.113.1")
            #expect(overAddress.status == 429)
            #expect(try await server.metric(byAddress) == 1)
            #expect(overAddress.headers["Retry-After"].first.flatMap(Int.init).map { $0 >= 1 } == true)
            // An IPv6 client counts by its /64: another address of the same /64 shares the bucket.
            #expect(try await post(500, from: "2001:db8:1:2::1").status == 200)
            #expect(try await post(100, from: "2001:db8:1:2:ffff::9").status == 200)
            #expect(try await post(1, from: "2001:db8:1:2:abcd::1").status == 429)
            #expect(try await post(1, from: "2001:db8:1:3::1").status == 429)  // another /64, but the key is spent
            // The key's burst of 1,200 is spent (a request the key refuses gives the address's token back):
            // any address is refused now.
            let overKey = try await post(1, from: "198.51.100.7")
            #expect(overKey.status == 429)
            #expect((try overKey.json()["detail"] as? String ?? "").contains("per ingest key"))
            // Each 429 is counted once, under the limit that refused it: two by address, two by key.
            #expect(try await server.metric(byAddress) == 2)
            #expect(try await server.metric(byKey) == 2)
        }
        // Refused batches stored nothing.
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 1_200)
    }

    /// Reading a request costs a token before its body is read, so bodies that are refused (not JSON,
    /// too large) are limited like batches; a request its key refuses gives the address's token back.
    @Test func everyRequestTakesATokenBeforeItsBodyIsRead() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.ingestion.ratePerClient = RateLimit(rate: 0.001, burst: 3)
        configuration.ingestion.ratePerKey = RateLimit(rate: 0.001, burst: 2)
        configuration.trustedProxies = ["127.0.0.1"]
        try await harness.run(configuration) { server in
            func post(_ body: String, from client: String) async throws -> Int {
                try await server.postEvents(
                    body: Data(body.utf8), key: harness.ingestKey, extraHeaders: [("X-Forwarded-For", client)]
                ).status
            }
            // The key's two tokens go to two bodies that are not JSON.
            #expect(try await post("{", from: "203.0.113.1") == 400)
            #expect(try await post("[]", from: "203.0.113.1") == 400)
            // The key's bucket is empty: refused, whatever the body, and the address keeps its third token.
            #expect(try await post("{\"events\":[]}", from: "203.0.113.1") == 429)
            // Without a key only the address's bucket counts: its third token, then nothing.
            let unauthenticated = try await server.request(
                .POST, "/v1/events", headers: [("Content-Type", "application/json"), ("X-Forwarded-For", "203.0.113.1")],
                body: Data("{}".utf8))
            #expect(unauthenticated.status == 401)
            let spent = try await server.request(
                .POST, "/v1/events", headers: [("Content-Type", "application/json"), ("X-Forwarded-For", "203.0.113.1")],
                body: Data("{}".utf8))
            #expect(spent.status == 429)
            #expect((try spent.json()["detail"] as? String ?? "").contains("per client address"))
        }
    }

    /// Tokens that cannot be keys cost no look-up; keys are read from memory, so a flood of made-up
    /// tokens neither pushes a real key out nor needs the database.
    @Test func madeUpTokensAreRefusedWithoutTheDatabaseAndRealKeysKeepWorking() async throws {
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var configuration = harness.configuration()
        configuration.database.port = proxy.port
        let now = harness.clock.now()
        try await harness.run(configuration) { server in
            await proxy.cut()
            let event = [clientEvent(occurredAt: now)]
            for token in ["nonsense", "upshift_ingest_short", "upshift_admin_\(String(repeating: "é", count: 43))", ""] {
                #expect(try await server.postEvents(event, key: token).status == 401, "\(token)")
            }
            // 2,000 well-shaped tokens nobody issued: each 401 at once, with the database gone. (No cache
            // holds the keys, so more tokens would only add load to the suites that share the machine.)
            try await withThrowingTaskGroup(of: Void.self) { group in
                for worker in 0..<8 {
                    group.addTask {
                        for _ in 0..<250 {
                            let token = "upshift_ingest_" + KeySecret.randomToken()
                            let reply = try await server.postEvents(body: Data(), key: token)
                            #expect(reply.status == 401, "worker \(worker)")
                        }
                    }
                }
                try await group.waitForAll()
            }
            // The real key still authenticates (its events wait for the database: 503, not 401).
            let real = try await server.postEvents(event, key: harness.ingestKey)
            #expect(real.status == 503)
            proxy.restore()
        }
        await proxy.stop()
    }

    /// One id, one event: a resend is a duplicate, another event under the same id a conflict naming the
    /// first field that differs, and another app's id that app's own.
    @Test func anIdIsOneEventOfItsApp() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let other = try await harness.sql { client in
            _ = try await CatalogStore(client: client, logger: TestEnvironment.logger).createApp(
                AppInfo(id: "other-app", name: "Other"), actor: "tests", reason: nil, now: now)
            return try await KeyStore(client: client, logger: TestEnvironment.logger)
                .create(name: "other", scope: .ingest, appId: "other-app", now: now).1
        }
        try await harness.run { server in
            let original = clientEvent(occurredAt: now.addingTimeInterval(-60))
            func results(_ events: [[String: String]], key: String? = nil) async throws -> [[String: Any]] {
                let reply = try await server.postEvents(events, key: key ?? harness.ingestKey)
                #expect(reply.status == 200)
                let results = try reply.json()["results"] as? [[String: Any]]
                return try #require(results)
            }
            #expect(try await results([original])[0]["status"] as? String == "accepted")
            #expect(try await results([original])[0]["status"] as? String == "duplicate")
            var changes: [(String, [String: String])] = []
            var moved = original
            moved["occurredAt"] = Timestamp.format(now.addingTimeInterval(-3_600))
            changes.append(("occurredAt", moved))
            var retyped = original
            retyped["type"] = "whats_new_shown"
            changes.append(("type", retyped))
            var reinstalled = original
            reinstalled["installId"] = UUID().uuidString.lowercased()
            changes.append(("installId", reinstalled))
            var upgraded = original
            upgraded["appVersion"] = "9.9.9"
            changes.append(("appVersion", upgraded))
            var relocated = original
            relocated["locale"] = "fr"
            changes.append(("locale", relocated))
            for (field, event) in changes {
                let result = try await results([event])[0]
                #expect(result["status"] as? String == "rejected", "\(field)")
                #expect(result["error"] as? String == "id_conflict", "\(field)")
                #expect(result["field"] as? String == field)
            }
            // Within one request too: the first copy decides.
            let fresh = clientEvent(occurredAt: now)
            var conflicting = fresh
            conflicting["appVersion"] = "2.0"
            let pair = try await results([fresh, fresh, conflicting])
            #expect(pair.map { $0["status"] as? String } == ["accepted", "duplicate", "rejected"])
            #expect(pair[2]["field"] as? String == "appVersion")
            // The same id in another app is that app's own event.
            #expect(try await results([original], key: other)[0]["status"] as? String == "accepted")
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 3)
    }

    /// A device offline for weeks resends an event stored while it was recent: a duplicate; the same
    /// id with other fields after 30 days is a conflict, and an unknown one too old is rejected.
    @Test func aResendAfterThirtyDaysIsSettledByWhatIsStored() async throws {
        let harness = try await Harness.make()
        let start = harness.clock.now()
        try await harness.run { server in
            let event = clientEvent(occurredAt: start)
            #expect(try await server.postEvents([event], key: harness.ingestKey).status == 200)
            harness.clock.advance(by: 40 * 86_400)
            var changed = event
            changed["appVersion"] = "3.0"
            let old = clientEvent(occurredAt: start)
            let body = try await server.postEvents([event, changed, old], key: harness.ingestKey).json()
            let results = try #require(body["results"] as? [[String: Any]])
            #expect(results.map { $0["status"] as? String } == ["duplicate", "rejected", "rejected"])
            #expect(results[1]["error"] as? String == "id_conflict")
            #expect(results[2]["error"] as? String == "occurred_too_long_ago")
        }
    }
}
