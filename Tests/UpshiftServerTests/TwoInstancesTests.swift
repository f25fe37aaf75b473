import Foundation
import NIOCore
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// Two real `upshift serve` processes (both roles) on one database, as behind a load balancer
/// (docs/OPERATIONS.md, "Deployment"): both ingest and answer checks, a catalog write through either is
/// served by the other's check, one runner per projection is active, a `kill -9` of the leader hands
/// every projection to the other, and the reports it then serves equal a rebuild.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct TwoInstancesTests {
    static let check = "/v1/apps/expenses/check?platform=ios&version=1.0.0"

    @Test func twoInstancesShareTheWorkAndTheSurvivorTakesOverFromAKilledLeader() async throws {
        let harness = try await Harness.make()
        let now = Date()
        let a = try ServerProcess(database: harness.database, port: try await freePort())
        let b = try ServerProcess(database: harness.database, port: try await freePort())
        let serverA = Server(port: a.port), serverB = Server(port: b.port)
        // A starts first and takes every projection's lock before B starts: B stands by.
        try await a.start()
        try await Self.waitUntil("A leads every projection", within: .seconds(60), log: a) {
            try await Self.leading(serverA).values.allSatisfy { $0 == 1 }
        }
        try await b.start()

        // The catalog: releases through A, then policy changes through each, served by the other's check.
        for (version, daysAgo) in [("1.1.0", 10), ("1.2.0", 4)] {
            let release: JSONValue = .object([
                "platform": .string("ios"), "version": .string(version),
                "releasedAt": .string(Timestamp.format(Self.halfHourBefore(now, hours: daysAgo * 24))),
            ])
            #expect(try await serverA.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release).status == 201)
        }
        var propagation: [String] = []
        for round in 0..<4 {
            let (writer, reader) = round % 2 == 0 ? (serverA, serverB) : (serverB, serverA)
            let minimum = round % 2 == 0 ? "1.2.0" : "1.0.0"
            let expected: JSONValue = .string(round % 2 == 0 ? "force" : "soft")
            let started = ContinuousClock.now
            let reply = try await writer.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                json: .object(["enabled": .bool(true), "minimumVersion": .string(minimum)]),
                headers: [("If-Match", "\"\(round)\"")])
            #expect(reply.status == 200)
            #expect(try await writer.request(.GET, Self.check).value()["action"] == expected, "the writer serves its own write")
            var seen = false
            while !seen, ContinuousClock.now - started < .seconds(3) {
                seen = try await reader.request(.GET, Self.check).value()["action"] == expected
                if !seen { try await Task.sleep(for: .milliseconds(5)) }
            }
            let elapsed = ContinuousClock.now - started
            #expect(seen, "round \(round): the other instance did not serve the write within 3 s")
            propagation.append("\(round % 2 == 0 ? "A → B" : "B → A") \(Self.milliseconds(elapsed))")
        }
        print(
            "TwoInstancesTests: catalog write to the other instance's check (write sent → answered there): "
                + propagation.joined(separator: ", "))
        // One catalog, one answer: a client's ETag from one instance is current on the other.
        let etag = try #require(try await serverA.request(.GET, Self.check).etag)
        #expect(try await serverB.request(.GET, Self.check).etag == etag)
        #expect(try await serverB.request(.GET, Self.check, headers: [("If-None-Match", etag)]).status == 304)

        // Both ingest and answer checks (with install ids, so that each stores observations).
        let acks = Acknowledgements()
        let fleet = Self.fleet(now: now)
        let half = fleet.count / 2
        let checks = 40
        for (index, chunk) in stride(from: 0, to: half, by: 200).enumerated() {
            let server = index % 2 == 0 ? serverA : serverB
            let reply = try await server.postEvents(Array(fleet[chunk..<min(chunk + 200, half)]), key: harness.ingestKey)
            #expect(reply.status == 200)
        }
        for index in 0..<checks {
            let server = index % 2 == 0 ? serverA : serverB
            let install = fleet[index * 7]["installId"]!
            let reply = try await server.request(.GET, Self.check + "&install=\(install)")
            #expect(reply.status == 200)
            #expect(try reply.value()["action"] == .string("soft"))
        }
        try await Self.waitUntil("every check's observation is stored", within: .seconds(10), log: a) {
            try await harness.count("SELECT count(*)::int FROM event_log WHERE type = 'checked'") == checks
        }
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE type <> 'checked' AND install_id IS NOT NULL") == half)
        acks.record(fleet[..<half].compactMap { $0["id"] })
        try await harness.waitForProjections(timeout: .seconds(60))

        // Exactly one runner per projection: one session holds each generation's lock, and A's metrics
        // say A leads each while B's say B leads none.
        let before = try await Self.lockHolders(harness)
        #expect(before.count == Projections.all.count)
        #expect(before.values.allSatisfy { $0.count == 1 }, "lock holders per projection: \(before)")
        #expect(try await Self.leading(serverA) == Dictionary(uniqueKeysWithValues: Projections.all.map { ($0.name, 1) }))
        #expect(try await Self.leading(serverB) == Dictionary(uniqueKeysWithValues: Projections.all.map { ($0.name, 0) }))
        let killedSessions = Set(before.values.joined())
        // One rollout worker too: one session, A's, holds its lock.
        let rolloutWorker = try await Self.rolloutLockHolders(harness)
        #expect(rolloutWorker.count == 1, "rollout worker lock holders: \(rolloutWorker)")

        // kill -9 of the leader while both ingest the rest, and while its runners are inside a statement
        // (each batch waits for the lock the test holds on the registry): B takes over every projection.
        async let posting: Void = Self.post(Array(fleet[half...]), to: (serverA, serverB), key: harness.ingestKey, acks: acks)
        let (killed, sessionsGone, takeover) = try await Self.whileHoldingTheRegistry(harness) {
            try await Self.waitUntil("a third of the rest is acknowledged and A's runners wait in a batch", within: .seconds(30), log: a) {
                guard acks.acked.count >= half + (fleet.count - half) / 3 else { return false }
                return try await harness.count(
                    "SELECT count(*)::int FROM pg_stat_activity WHERE pid = ANY(\(Array(killedSessions))) AND wait_event_type = 'Lock'")
                    == killedSessions.count
            }
            a.kill9()
            let killed = ContinuousClock.now
            acks.markKilled()
            var sessionsGone: Duration?
            while ContinuousClock.now - killed < .seconds(30) {
                if sessionsGone == nil,
                    try await harness.count("SELECT count(*)::int FROM pg_stat_activity WHERE pid = ANY(\(Array(killedSessions)))") == 0
                {
                    sessionsGone = ContinuousClock.now - killed
                }
                let holders = try await Self.lockHolders(harness)
                if holders.count == Projections.all.count,
                    holders.values.allSatisfy({ $0.count == 1 && killedSessions.isDisjoint(with: $0) }),
                    try await Self.leading(serverB).values.allSatisfy({ $0 == 1 })
                {
                    return (killed, sessionsGone, Optional(ContinuousClock.now - killed))
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            return (killed, sessionsGone, nil)
        }
        #expect(takeover != nil, "B did not take over every projection within 30 s: \(b.log().suffix(3000))")
        print(
            "TwoInstancesTests: after kill -9 of the leader (\(acks.ackedBeforeKill.count - half) of the last "
                + "\(fleet.count - half) events acknowledged, each runner in a statement waiting for a lock), its sessions were gone "
                + "from PostgreSQL in \(sessionsGone.map(Self.milliseconds) ?? "more than 30 s") and the other instance "
                + "led every projection in \(takeover.map(Self.milliseconds) ?? "more than 30 s") (target 10 s, bound 30 s)")

        // The survivor's rollout worker takes over too, and advances a schedule written through it.
        try await Self.waitUntil("B holds the rollout worker's lock", within: .seconds(30), log: b) {
            let holders = try await Self.rolloutLockHolders(harness)
            return holders.count == 1 && holders != rolloutWorker
        }
        let scheduled = try await serverB.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
            "platform": .string("ios"), "version": .string("1.3.0"), "releasedAt": .string(Timestamp.format(now)),
            "rolloutSchedule": .array([
                .object(["percent": .number(10), "afterHours": .number(0)]),
                .object(["percent": .number(100), "afterHours": .number(0.001)]),  // 3.6 s
            ]),
        ]))
        #expect(scheduled.status == 201)
        try await Self.waitUntil("the schedule's last step, written by B's worker", within: .seconds(20), log: b) {
            try await serverB.send(.GET, "/v1/apps/expenses/releases/ios/1.3.0", key: harness.readKey).value()["rolloutPercent"]
                == .number(100)
        }

        // The survivor ingests what is left (and what A never answered), and its runners apply it all.
        try await posting
        let stored = try await harness.sql { client in
            var counts: [String: Int] = [:]
            let rows = try await client.query(
                "SELECT event_id::text, count(*)::int FROM event_log WHERE type <> 'checked' AND install_id IS NOT NULL GROUP BY 1")
            for try await (id, count) in rows.decode((String, Int).self) { counts[id] = count }
            return counts
        }
        #expect(Set(stored.keys) == Set(fleet.compactMap { $0["id"] }), "every event is stored")
        #expect(stored.values.allSatisfy { $0 == 1 }, "and stored once")
        try await harness.waitForProjections(timeout: .seconds(30))
        print("TwoInstancesTests: every projection caught up \(Self.milliseconds(ContinuousClock.now - killed)) after the kill")

        // The reports equal a rebuild: table for table, and answer for answer on the survivor.
        let reports = try await Self.reports(serverB, key: harness.readKey, now: now)
        try await harness.expectRebuildEqualsActiveTables()
        let rebuilt = try await Self.reports(serverB, key: harness.readKey, now: now)
        for (path, body) in reports.sorted(by: { $0.key < $1.key }) {
            #expect(body == rebuilt[path], "\(path) changed with the rebuild:\n\(body)\n\(rebuilt[path] ?? "")")
        }
        #expect(await b.terminate() == 0)
    }

    /// Runs `body` while a transaction of the test holds `projections` in `SHARE` mode: every runner's
    /// next batch, whose checkpoint compare-and-set updates that table, waits inside its statement
    /// meanwhile. (A lock on a table takes no transaction id, so the feed is not held back.)
    static func whileHoldingTheRegistry<T: Sendable>(_ harness: Harness, _ body: @Sendable () async throws -> T) async throws -> T {
        try await harness.sql { client in
            try await client.withConnection { connection in
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                try await connection.query("LOCK TABLE projections IN SHARE MODE", logger: TestEnvironment.logger)
                do {
                    let result = try await body()
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    return result
                } catch {
                    _ = try? await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    throw error
                }
            }
        }
    }

    /// Posts `events` in batches of 50, every other one to A, as a load balancer would: a batch that is
    /// not answered `200` (A was killed) goes to B until it is, and so does every later batch.
    static func post(_ events: [[String: String]], to servers: (Server, Server), key: String, acks: Acknowledgements) async throws {
        var first = true  // A is in the rotation
        for (index, start) in stride(from: 0, to: events.count, by: 50).enumerated() {
            let batch = Array(events[start..<min(start + 50, events.count)])
            var server = first && index % 2 == 0 ? servers.0 : servers.1
            let deadline = ContinuousClock.now.advanced(by: .seconds(60))
            while true {
                // (The HTTP client retries a refused connection until the timeout: A's is short.)
                let timeout: TimeAmount = server.port == servers.0.port ? .seconds(2) : .seconds(10)
                if let reply = try? await server.postEvents(batch, key: key, timeout: timeout), reply.status == 200 { break }
                guard ContinuousClock.now < deadline else { throw HarnessError("a batch was not stored within 60 s") }
                if server.port == servers.0.port { first = false }
                server = servers.1
                try await Task.sleep(for: .milliseconds(20))
            }
            acks.record(batch.compactMap { $0["id"] })
            try await Task.sleep(for: .milliseconds(40))
        }
    }

    /// Each report of the app on ios, JSON and CSV, by path.
    static func reports(_ server: Server, key: String, now: Date) async throws -> [String: String] {
        let from = UTCDay(now.addingTimeInterval(-20 * 86_400)), to = UTCDay(now)
        let paths = [
            "adoption?platform=ios&from=\(from)&to=\(to)", "releases/1.1.0?platform=ios", "releases/1.2.0?platform=ios",
            "prompts?platform=ios", "minimum-impact?platform=ios&version=1.2.0&window=7",
        ]
        var bodies: [String: String] = [:]
        for path in paths {
            for accept in ["application/json", "text/csv"] {
                let reply = try await server.request(
                    .GET, "/v1/apps/expenses/reports/\(path)", headers: [("Authorization", "Bearer \(key)"), ("Accept", accept)])
                #expect(reply.status == 200, "\(path): \(reply.text)")
                bodies["\(accept) \(path)"] = reply.text
            }
        }
        #expect(bodies.values.allSatisfy { $0.count > 20 })
        return bodies
    }

    /// The sessions that hold the runner lock of each projection's generations that are not retired,
    /// from `pg_locks` (the runner's key: `hashtextextended('upshift:projection:<name>:<generation>', 0)`).
    static func lockHolders(_ harness: Harness) async throws -> [String: [Int32]] {
        try await harness.sql { client in
            let rows = try await client.query(
                """
                SELECT p.name, l.pid
                FROM projections p JOIN pg_locks l ON l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND ((l.classid::int8 << 32) | l.objid::int8)
                        = hashtextextended('upshift:projection:' || p.name || ':' || p.generation, 0)
                WHERE p.state <> 'retired'
                """)
            var holders: [String: [Int32]] = [:]
            for try await (name, pid) in rows.decode((String, Int32).self) { holders[name, default: []].append(pid) }
            return holders
        }
    }

    /// The sessions that hold the rollout worker's lock (`upshift:rollout-schedules`).
    static func rolloutLockHolders(_ harness: Harness) async throws -> [Int32] {
        try await harness.sql { client in
            let rows = try await client.query(
                """
                SELECT l.pid FROM pg_locks l
                WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                    AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended('upshift:rollout-schedules', 0)
                """)
            var pids: [Int32] = []
            for try await pid in rows.decode(Int32.self) { pids.append(pid) }
            return pids
        }
    }

    /// `upshift_projection_leading{projection}` of an instance, by projection.
    static func leading(_ server: Server) async throws -> [String: Double] {
        let text = try await server.request(.GET, "/metrics").text
        var values: [String: Double] = [:]
        for line in text.split(separator: "\n") {
            guard let match = line.wholeMatch(of: #/upshift_projection_leading\{projection="([a-z_]+)"\} ([0-9.e+-]+)/#),
                let value = Double(match.2)
            else { continue }
            values[String(match.1)] = value
        }
        return values
    }

    static func waitUntil(
        _ what: String, within limit: Duration, log server: ServerProcess, _ condition: () async throws -> Bool
    ) async throws {
        do {
            try await Waits.until(what, timeout: limit, condition)
        } catch let error as Waits.TimedOut {
            throw HarnessError("\(error); log: \(server.log().suffix(3000))")
        }
    }

    /// Whole hours plus half an hour before `now`: no event sits near a window edge of the reports
    /// (now − 7 days …), which move with the clock while the test runs.
    static func halfHourBefore(_ now: Date, hours: Int) -> Date {
        now.addingTimeInterval(-Double(hours) * 3_600 - 1_800)
    }

    static func milliseconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        return "\(seconds * 1_000 + attoseconds / 1_000_000_000_000_000) ms"
    }

    /// Installs over two weeks on ios (`fleetEvents`): launches, prompts, and updates through 1.0.0, 1.1.0
    /// and 1.2.0; every launch on a half hour before `now`, its prompt and update at most a minute after.
    static func fleet(now: Date, installs: Int = 200) -> [[String: String]] {
        var random = SplitMix64(seed: 18)
        return fleetEvents(installs: installs, random: &random, promptOneIn: 5) { day, random in
            halfHourBefore(now, hours: day * 24 + Int(random.next() % 20))
        }.map(\.posted)
    }
}
