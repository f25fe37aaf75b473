import Foundation
import NIOCore
import Testing
import UpshiftCore
import UpshiftTestSupport

@testable import UpshiftServer

/// The check-answer cache holds at most its budget of bytes, whatever it is asked.
@Suite(.serverTimeLimit) struct CheckCacheTests {
    /// The query index's split of `install` out of a query, in one pass over its bytes, against the
    /// plain definition: split at `&` without empty parameters, `install=…` taken out, the rest joined by `&`.
    @Test func splittingTheInstallOutOfAQueryAgreesWithThePlainDefinition() {
        // On the query's bytes, as a server reads them: a combining mark after `&` or `=` is a byte like any other.
        func plain(_ query: String) -> (rest: String, install: Substring?, clean: Bool) {
            let parts = query.utf8.split(separator: UInt8(ascii: "&")).map { Substring($0) }
            func isInstall(_ part: Substring) -> Bool { part.utf8.starts(with: "install=".utf8) }
            let encodedName = parts.contains { $0.utf8.prefix { $0 != UInt8(ascii: "=") }.contains(UInt8(ascii: "%")) }
            let installs = parts.filter(isInstall)
            guard !installs.isEmpty else { return (query, nil, !encodedName) }
            return (
                parts.filter { !isInstall($0) }.joined(separator: "&"), installs.last.map { Substring($0.utf8.dropFirst(8)) },
                !encodedName && installs.count == 1
            )
        }
        let pieces = [
            "install=", "install", "instal=", "install=abc", "&", "&&", "=", "%69nstall=x", "a=%26", "platform=ios", "x", "é=1",
            "v=1.0", "\u{301}", "install=\u{301}", "&\u{301}", "=\u{200D}",
        ]
        var generator = SplitMix64(seed: 11)
        for _ in 0..<20_000 {
            let query = (0..<generator.int(0...6)).map { _ in pieces[generator.int(0...(pieces.count - 1))] }.joined()
            let (rest, install, clean) = CheckQueryIndex.splitInstall(query)
            let expected = plain(query)
            #expect(rest == expected.rest && install == expected.install && clean == expected.clean, "\(query)")
        }
        let split = CheckQueryIndex.splitInstall("platform=ios&install=0190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9d&version=1.0")
        #expect(split.rest == "platform=ios&version=1.0")
        #expect(split.install == "0190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9d")
        #expect(split.clean)
        // A combining mark after `=` stays in the install id (which then is no UUID: 400), not dropped with it.
        #expect(CheckQueryIndex.splitInstall("install=\u{301}x").install.map { Array($0.utf8) } == [0xCC, 0x81, 0x78])
    }

    @Test func theTableNeverHoldsMoreThanItsCapacityAndForgetsTheLeastRecentlyUsed() {
        var table = LRUTable<Int, String>(capacity: 10_000)
        var generator = SplitMix64(seed: 7)
        for _ in 0..<100_000 {
            let key = generator.int(0...5_000)
            if generator.unit() < 0.3 {
                _ = table.value(for: key)
            } else {
                table.set("v", for: key, cost: generator.int(1...700))
            }
            #expect(table.used <= table.capacity)
        }
        // Against a plain model (keys oldest first), under random reads, writes, updates and removals.
        var model: [(key: Int, value: Int, cost: Int)] = []
        var checked = LRUTable<Int, Int>(capacity: 1_000)
        for step in 0..<20_000 {
            let key = generator.int(0...60)
            switch generator.int(0...3) {
            case 0:
                let found = model.firstIndex { $0.key == key }
                #expect(checked.value(for: key) == found.map { model[$0].value })
                if let found { model.append(model.remove(at: found)) }
            case 1:
                let cost = generator.int(1...300)
                model.removeAll { $0.key == key }
                if cost <= 1_000 {
                    while model.map(\.cost).reduce(0, +) + cost > 1_000 { model.removeFirst() }
                    model.append((key, step, cost))
                }
                checked.set(step, for: key, cost: cost)
            case 2:
                checked.update(key) { $0 = -step }
                if let found = model.firstIndex(where: { $0.key == key }) {
                    model[found].value = -step
                    model.append(model.remove(at: found))
                }
            default:
                checked.remove(key)
                model.removeAll { $0.key == key }
            }
            #expect(checked.used == model.map(\.cost).reduce(0, +))
            #expect(checked.count == model.count)
        }
        for key in 0...60 {
            #expect(checked.peek(key) == model.first { $0.key == key }?.value)
        }

        var lru = LRUTable<String, Int>(capacity: 3)
        for (index, key) in ["a", "b", "c"].enumerated() { lru.set(index, for: key) }
        _ = lru.value(for: "a")  // b is now the least recently used
        lru.set(3, for: "d")
        #expect(lru.peek("b") == nil)
        #expect(lru.peek("a") == 0 && lru.peek("c") == 2 && lru.peek("d") == 3)
        lru.set(9, for: "huge", cost: 4)  // larger than the whole table: not kept, nothing evicted
        #expect(lru.count == 3 && lru.peek("huge") == nil)
    }

    /// The search that finds where an answer's body holds `installedVersion` and `stalenessDays`: the
    /// first occurrence, as a plain scan finds it, in bodies and patterns of a small alphabet (many near misses).
    @Test func theBodySearchFindsTheFirstOccurrence() {
        var generator = SplitMix64(seed: 5)
        for _ in 0..<2_000 {
            let body = (0..<generator.int(0...200)).map { _ in UInt8(ascii: "a") + UInt8(generator.int(0...2)) }
            let pattern = (0..<generator.int(1...4)).map { _ in UInt8(ascii: "a") + UInt8(generator.int(0...2)) }
            let plain = body.count < pattern.count ? nil
                : (0...(body.count - pattern.count)).first { body[$0..<($0 + pattern.count)].elementsEqual(pattern) }
            #expect(CheckAnswerCache.Answer.offset(of: pattern, in: ByteBuffer(bytes: body)) == plain)
        }
    }

    @Test func theAnswerCacheKeepsWithinItsBytesUnderRandomQuestions() {
        let cache = CheckAnswerCache(byteLimit: 256 * 1024)
        var generator = SplitMix64(seed: 11)
        for round in 0..<20_000 {
            let request = CheckRequest(
                platform: "ios", version: Version("\(generator.int(1...99)).\(generator.int(0...99))")!,
                os: Version("\(generator.int(12...18)).\(generator.int(0...9))"), locale: "de-AT")
            let app = AppID(validating: "app\(generator.int(0...50))")!
            let question = CheckAnswerCache.Question(request, app: app, generation: 1)
            let body = ByteBuffer(repeating: 0x61, count: generator.int(100...8_000))
            cache.store(
                .init(
                    body: body, etag: "\"\(round)\"", headers: [.contentType: "application/json"], action: .none,
                    reason: .upToDate, latestVersion: nil, interval: 0, dependsOnInstall: false,
                    installedVersion: request.version.text, offered: nil, stalenessDays: nil),
                for: question)
            let junk = String(repeating: "x", count: generator.int(0...1_100))
            cache.store(request, question: question, query: "platform=ios&junk=\(junk)")
            #expect(cache.bytes <= cache.byteLimit)
        }
        #expect(cache.bytes > cache.byteLimit / 2, "the budget is used, not cleared")
    }

    /// Ignored parameters as long as the head allows, and 2,000 distinct valid questions (about 8 KiB
    /// of notes each, far past the budget of 256 KiB) against a catalog with long notes: every one
    /// answered, the cache within its budget.
    @Test func junkAndDistinctQuestionsStayWithinTheBudget() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0
        configuration.check.cacheBytes = 256 * 1024
        let now = harness.clock.now()
        try await harness.run(configuration) { server in
            let lines = (0..<10).map { "Line \($0): " + String(repeating: "ü", count: 400) }
            for minor in 0..<5 {
                let release: JSONValue = [
                    "platform": "ios", "version": .string("2.\(minor)"), "releasedAt": .string(Timestamp.format(now.addingTimeInterval(-86_400))),
                    "notes": ["en": .array(lines.map(JSONValue.string)), "de": .array(lines.map(JSONValue.string))],
                ]
                let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release)
                #expect(created.status == 201, "\(created.status): \(created.text)")
            }
            let junk = String(repeating: "j", count: 15_000)
            try await Self.ask(1_000, server: server) { index in
                "platform=ios&version=1.\(index % 7)&junk\(index)=\(junk)"
            }
            try await Self.ask(2_000, server: server) { index in
                let (version, os, locale, previous) = (index % 25, index / 25 % 20, ["en", "de", "de_AT", "fr"][index / 500 % 4], index / 400)
                return "platform=ios&version=1.\(version)&os=1\(os).0&locale=\(locale)&previous=0.\(previous)"
            }
            let metrics = try await server.request(.GET, "/metrics")
            let line = metrics.text.split(separator: "\n")
                .first { $0.hasPrefix("upshift_check_cache_bytes ") }
            let bytes = try #require(line.flatMap { Double($0.split(separator: " ")[1]) })
            #expect(bytes > 0)
            #expect(bytes <= Double(256 * 1024))
        }
    }

    static func ask(_ count: Int, server: Server, query: @escaping @Sendable (Int) -> String) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for index in stride(from: worker, to: count, by: 8) {
                        let reply = try await server.request(.GET, "/v1/apps/expenses/check?" + query(index))
                        #expect(reply.status == 200, "\(reply.status)")
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// Every spelling of one version (`1.0+a`, `1.0+b`, `1.0.0`, `01.0`) is one question to the cache:
    /// the long answer is kept once, and each request is still answered with its own spelling in
    /// `installedVersion` and the ETag of that body.
    @Test func spellingsOfOneVersionShareOneAnswerEachAnsweredAsWritten() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0
        let now = harness.clock.now()
        try await harness.run(configuration) { server in
            let lines = (0..<20).map { "Line \($0): " + String(repeating: "ü", count: 400) }
            let release: JSONValue = [
                "platform": "ios", "version": "2.0", "releasedAt": .string(Timestamp.format(now.addingTimeInterval(-86_400))),
                "notes": ["en": .array(lines.map(JSONValue.string))],
            ]
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release).status == 201)
            func ask(_ version: String) async throws -> (Server.Reply, JSONValue) {
                let reply = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=\(version)")
                #expect(reply.status == 200, "\(version)")
                return (reply, try reply.value())
            }
            let (first, firstBody) = try await ask("1.0%2Ba")
            #expect(firstBody["installedVersion"] == "1.0+a")
            #expect(firstBody["action"] == "soft")
            let before = try #require(try await server.metric("upshift_check_cache_bytes"))
            var tags: Set<String> = [first.etag ?? ""]
            for (query, written) in [("1.0%2Bb", "1.0+b"), ("1.0.0", "1.0.0"), ("01.0", "01.0"), ("1.00%2Bbuild.7", "1.00+build.7")] {
                let (reply, body) = try await ask(query)
                #expect(body["installedVersion"] == .string(written))
                // The same decision otherwise, byte for byte.
                guard case .object(var rest) = body, case .object(var firstRest) = firstBody else { Issue.record("not objects"); continue }
                rest["installedVersion"] = nil
                firstRest["installedVersion"] = nil
                #expect(rest == firstRest, "\(written)")
                // Its own ETag, and that one answers a revalidation.
                let tag = try #require(reply.etag)
                #expect(tags.insert(tag).inserted, "\(written)")
                let again = try await server.request(
                    .GET, "/v1/apps/expenses/check?platform=ios&version=\(query)", headers: [("If-None-Match", tag)])
                #expect(again.status == 304, "\(written)")
                // And asked again, the same body (from the cache).
                #expect(try await ask(query).0.body == reply.body, "\(written)")
            }
            // One answer of \(first.body.count) bytes kept, not one per spelling: only the small entries of
            // the raw-query index came in.
            let after = try #require(try await server.metric("upshift_check_cache_bytes"))
            #expect(first.body.count > 8_000)
            #expect(after - before < Double(first.body.count), "\(before) → \(after) bytes")
        }
    }

    /// The `checked` event records the request it answers, not the one that filled the cache.
    @Test func anObservationRecordsItsOwnBuildOSAndLocale() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0
        try await harness.run(configuration) { server in
            let installs = ["9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e01", "9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e02", "9f1c2d3e-4b5a-4c6d-8e7f-0a1b2c3d4e03"]
            // Same question by the cache's key (build ignored, `de_AT` is `de-AT`, `16.0` is `16`).
            let queries = [
                "platform=ios&version=1.0&build=1&os=16.0&locale=de_AT&install=\(installs[0])",
                "platform=ios&version=1.0&build=2&os=16&locale=de-AT&install=\(installs[1])",
                "platform=ios&version=1.0&build=2&os=16&locale=de-AT&install=\(installs[2])",  // the query index
            ]
            var tags: Set<String> = []
            for query in queries {
                let reply = try await server.request(.GET, "/v1/apps/expenses/check?" + query)
                #expect(reply.status == 200)
                tags.insert(reply.etag ?? "")
            }
            #expect(tags.count == 1)
            try await Self.waitForRows(harness, 3)
            let rows = try await harness.sql { client in
                var rows: [String: String] = [:]
                for try await (install, data) in try await client.query(
                    "SELECT install_id::text, data::text FROM event_log WHERE type = 'checked'"
                ).decode((String, String).self) { rows[install] = data }
                return rows
            }
            let decoded = try rows.mapValues { try JSONValue.parse(Data($0.utf8)) }
            #expect(decoded[installs[0]]?["build"] == 1 && decoded[installs[0]]?["osVersion"] == "16.0")
            #expect(decoded[installs[0]]?["locale"] == "de_AT")
            for install in installs.dropFirst() {
                #expect(decoded[install]?["build"] == 2 && decoded[install]?["osVersion"] == "16")
                #expect(decoded[install]?["locale"] == "de-AT")
            }
        }
    }

    static func waitForRows(_ harness: Harness, _ count: Int) async throws {
        try await Waits.until("\(count) observations written", timeout: .seconds(10)) {
            try await harness.count("SELECT count(*)::int FROM event_log WHERE type = 'checked'") >= count
        }
    }
}
