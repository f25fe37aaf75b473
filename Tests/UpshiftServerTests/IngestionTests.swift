import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

@Suite(.tags(.timed), .serverTimeLimit) struct IngestionTests {
    @Test func eachEventGetsItsOwnResultAndRetriesAreStoredOnce() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let good = clientEvent(occurredAt: now)
        let prompt = clientEvent(
            type: "prompt_shown", occurredAt: now, extra: ["promptKind": "soft", "targetVersion": "1.9.0"])
        let reserved = clientEvent(type: "checked", occurredAt: now)
        let badVersion = clientEvent(occurredAt: now, version: "v1.2")
        let batch = [good, prompt, reserved, badVersion, good]

        try await harness.run { server in
            let first = try await server.postEvents(batch, key: harness.ingestKey)
            #expect(first.status == 200)
            let body = try first.json()
            #expect(body["accepted"] as? Int == 2)
            #expect(body["duplicates"] as? Int == 1)  // the same id twice in one batch
            #expect(body["rejected"] as? Int == 2)
            let results = try #require(body["results"] as? [[String: Any]])
            #expect(results.map { $0["status"] as? String } == ["accepted", "accepted", "rejected", "rejected", "duplicate"])
            #expect(results[2]["error"] as? String == "reserved_type")
            #expect(results[3]["error"] as? String == "invalid_field")
            #expect(results[3]["field"] as? String == "appVersion")
            #expect(results.map { $0["index"] as? Int } == [0, 1, 2, 3, 4])
            #expect(results[0]["id"] as? String == good["id"])

            // The client retries the whole batch: nothing new is stored.
            let retry = try await server.postEvents(batch, key: harness.ingestKey).json()
            #expect(retry["accepted"] as? Int == 0)
            #expect(retry["duplicates"] as? Int == 3)
            #expect(retry["rejected"] as? Int == 2)
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 2)
        let type = try await harness.sql { client in
            for try await (type, kind) in try await client.query(
                "SELECT type, data->>'promptKind' FROM event_log WHERE type = 'prompt_shown'"
            ).decode((String, String).self) { return "\(type)/\(kind)" }
            return ""
        }
        #expect(type == "prompt_shown/soft")
    }

    /// Unknown members are ignored (forward compatibility), and the answer says which.
    @Test func membersTheServerDoesNotReadAreNamedAndNotStored() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let typo = clientEvent(occurredAt: now, extra: ["osVerison": "17.5"])
        let otherType = clientEvent(
            type: "prompt_shown", occurredAt: now,
            extra: ["promptKind": "soft", "targetVersion": "1.9.0", "dismissAction": "later"])
        let plain = clientEvent(occurredAt: now)
        let badAndTypo = clientEvent(occurredAt: now, version: "v2", extra: ["sdkVersion": "9"])
        try await harness.run { server in
            for expected in ["accepted", "duplicate"] {
                let body = try await server.postEvents([typo, otherType, plain, badAndTypo], key: harness.ingestKey).json()
                let results = try #require(body["results"] as? [[String: Any]])
                #expect(results.map { $0["status"] as? String } == [expected, expected, expected, "rejected"])
                #expect(results.map { $0["ignored"] as? [String] } == [["osVerison"], ["dismissAction"], nil, ["sdkVersion"]])
            }
        }
        let data = try await harness.strings("SELECT data::text FROM event_log WHERE install_id IS NOT NULL ORDER BY type")
        #expect(data.count == 3)
        #expect(data.allSatisfy { !$0.contains("osVerison") && !$0.contains("dismissAction") }, "\(data)")
    }

    @Test func anotherAppsEventIsRejectedAlone() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            let body = try await server.postEvents(
                [clientEvent(occurredAt: now, extra: ["appId": "someone-else"]), clientEvent(occurredAt: now, extra: ["appId": "expenses"])],
                key: harness.ingestKey
            ).json()
            let results = try #require(body["results"] as? [[String: Any]])
            #expect(results[0]["error"] as? String == "app_mismatch")
            #expect(results[1]["status"] as? String == "accepted")
        }
    }

    @Test func theServerClockBoundsOccurredAt() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            let stored = clientEvent(occurredAt: now.addingTimeInterval(-29 * 86_400))
            let body = try await server.postEvents(
                [clientEvent(occurredAt: now.addingTimeInterval(25 * 3600)),
                 clientEvent(occurredAt: now.addingTimeInterval(-31 * 86_400)), stored],
                key: harness.ingestKey
            ).json()
            let results = try #require(body["results"] as? [[String: Any]])
            #expect(results.map { $0["error"] as? String } == ["occurred_in_future", "occurred_too_long_ago", nil])
            // Moving the server's clock moves the window: an event of that time is now too old…
            harness.clock.advance(by: 2 * 86_400)
            let later = try await server.postEvents(
                [clientEvent(occurredAt: now.addingTimeInterval(-29 * 86_400)), stored], key: harness.ingestKey
            ).json()
            let laterResults = try #require(later["results"] as? [[String: Any]])
            #expect(laterResults.map { $0["status"] as? String } == ["rejected", "duplicate"])
            #expect(laterResults.first?["error"] as? String == "occurred_too_long_ago")
            // …but a retry of the one stored while it was recent (its first answer lost) is a duplicate,
            // still stored once: the client drops it knowing the server has it.
            #expect(later["duplicates"] as? Int == 1 && later["rejected"] as? Int == 1)
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE type = 'launched'") == 1)
        }
    }

    @Test func limitsAnswer413() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            let tooMany = (0..<501).map { _ in clientEvent(occurredAt: now) }
            let count = try await server.postEvents(tooMany, key: harness.ingestKey)
            #expect(count.status == 413)
            #expect(count.headers["Content-Type"].first == "application/problem+json")

            let padding = String(repeating: "x", count: (1 << 20) + 10)
            let big = try await server.postEvents(
                body: Data(#"{"events": [], "padding": "\#(padding)"}"#.utf8), key: harness.ingestKey)
            #expect(big.status == 413)
            #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 0)
        }
    }

    @Test func gzipBodiesAreAcceptedAndLimitedAfterDecompression() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            let events = (0..<200).map { _ in clientEvent(occurredAt: now) }
            let json = try JSONSerialization.data(withJSONObject: ["events": events])
            let reply = try await server.postEvents(
                body: try gzip(json), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
            #expect(reply.status == 200)
            #expect(try reply.json()["accepted"] as? Int == 200)

            // 2 MiB of spaces compress to a few KiB, but are refused once inflated past 1 MiB.
            let bomb = Data(#"{"events": []"#.utf8) + Data(repeating: 0x20, count: 2 << 20) + Data("}".utf8)
            let refused = try await server.postEvents(
                body: try gzip(bomb), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
            #expect(refused.status == 413)

            let corrupt = try await server.postEvents(
                body: Data("not gzip".utf8), key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
            #expect(corrupt.status == 400)

            // A stream whose JSON is whole but whose gzip is not: each is refused and stores nothing, where
            // zlib alone reads up to the end of the first member and takes a cut-off stream for one still coming.
            let more = try JSONSerialization.data(withJSONObject: ["events": (0..<3).map { _ in clientEvent(occurredAt: now) }])
            let whole = try gzip(more)
            var badChecksum = whole
            badChecksum[badChecksum.count - 8] ^= 0x01
            let broken: [(String, Data)] = [
                ("the trailer cut off", whole.dropLast(8)),
                ("the last byte cut off", whole.dropLast(1)),
                ("bytes after the stream", whole + Data("garbage".utf8)),
                ("a second member", whole + (try gzip(Data(#"{"events": []}"#.utf8)))),
                ("a wrong checksum", badChecksum),
                ("the header alone", whole.prefix(10)),
                ("no byte at all", Data()),
            ]
            for (what, body) in broken {
                let reply = try await server.postEvents(body: body, key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")])
                #expect(reply.status == 400, "\(what): \(reply.status)")
                #expect(try reply.json()["field"] as? String == "body", "\(what)")
            }
            #expect(try await server.postEvents(body: whole, key: harness.ingestKey, extraHeaders: [("Content-Encoding", "gzip")]).status == 200)
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 203)
    }

    @Test func keysAreCheckedAndScoped() async throws {
        let harness = try await Harness.make()
        let event = [clientEvent(occurredAt: harness.clock.now())]
        try await harness.run { (server: Server) async throws in
            #expect(try await server.postEvents(event, key: nil).status == 401)
            #expect(try await server.postEvents(event, key: "upshift_ingest_unknown").status == 401)
            #expect(try await server.postEvents(event, key: harness.readKey).status == 403)
            #expect(try await server.postEvents(event, key: harness.adminKey).status == 403)
            #expect(try await server.postEvents(event, key: harness.ingestKey).status == 200)
        }
        // Revoked with the CLI's store call; a server started afterwards (or after its 10 s key cache) refuses it.
        try await harness.sql { client in
            _ = try await UpshiftStore.KeyStore(client: client, logger: TestEnvironment.logger).revoke("ios-app", now: Date())
        }
        try await harness.run { server in
            let reply = try await server.postEvents(event, key: harness.ingestKey)
            #expect(reply.status == 401)
            #expect(try reply.json()["type"] as? String == "urn:upshift:problem:unauthorized")
        }
    }

    @Test(arguments: [#"{"events": [}"#, #"[1, 2]"#, #"{"events": 5}"#, ""])
    func malformedBodiesAnswer400ProblemJSON(_ body: String) async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let reply = try await server.postEvents(body: Data(body.utf8), key: harness.ingestKey)
            #expect(reply.status == 400)
            #expect(reply.headers["Content-Type"].first == "application/problem+json")
            let problem = try reply.json()
            #expect(problem["status"] as? Int == 400)
            #expect(problem["field"] as? String != nil, "a malformed body names where it breaks")
        }
    }

    @Test func fiftyConcurrentClientsStoreExactlyTwentyThousandEvents() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let clients = 50
        let perClient = 400
        try await harness.run { server in
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<clients {
                    group.addTask {
                        var accepted = 0
                        // 400 events per client in requests of 1 to 40 events.
                        var sent = 0
                        while sent < perClient {
                            let size = min(perClient - sent, Int.random(in: 1...40))
                            let events = (0..<size).map { _ in clientEvent(occurredAt: now.addingTimeInterval(-Double.random(in: 0...86_400))) }
                            let reply = try await server.postEvents(events, key: harness.ingestKey)
                            #expect(reply.status == 200)
                            accepted += try reply.json()["accepted"] as? Int ?? 0
                            sent += size
                        }
                        return accepted
                    }
                }
                let accepted = try await group.reduce(0, +)
                #expect(accepted == clients * perClient)
            }
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") == 20_000)
        #expect(try await harness.count("SELECT count(DISTINCT event_id)::int FROM event_log WHERE install_id IS NOT NULL") == 20_000)
    }

    @Test func healthEndpointsAnswer() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            #expect(try await server.request(.GET, "/health/live").status == 200)
            #expect(try await server.request(.GET, "/health/ready").status == 200)
            let db = try await server.request(.GET, "/health/db")
            #expect(db.status == 200)
            #expect(try db.json()["status"] as? String == "ok")
            _ = try await server.postEvents([clientEvent(occurredAt: harness.clock.now())], key: harness.ingestKey)
            let metrics = try await server.request(.GET, "/metrics")
            #expect(metrics.text.contains(#"upshift_events_total{status="accepted"} 1"#))
        }
    }
}

/// gzip with the system's gzip tool (the server decompresses with zlib: two implementations meet).
func gzip(_ data: Data) throws -> Data {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/bin/gzip")
    process.arguments = ["-c"]
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    let writer = Thread {
        input.fileHandleForWriting.write(data)
        try? input.fileHandleForWriting.close()
    }
    writer.start()
    let compressed = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return compressed
}
