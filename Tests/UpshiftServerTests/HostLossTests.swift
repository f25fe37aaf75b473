import Foundation
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// A leader whose host vanishes (docs/OPERATIONS.md, "Host loss and partitions"): two `upshift serve`
/// processes on a cluster of the test's own, the leader reaching it through 127.0.0.2 and the standby
/// through 127.0.0.1. An nftables rule drops every packet to and from 127.0.0.2's PostgreSQL port, both
/// ways: nothing closes a socket and no kernel answers a keepalive, as when a host is lost. The standby
/// must take over every projection, the rollout worker and a webhook delivery in flight within the bound,
/// nothing may be applied twice, and the old leader, once packets flow again, must find itself a follower.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct HostLossTests {
    /// Takeover: the standby ends a holder's session idle for 7 s (``LeaderHeartbeat/standbyBound``) and
    /// retries its locks every 1 s (projections) or 2 s (the rollout worker). Asserted with room for a
    /// loaded machine; the measured figure is printed.
    static let takeoverBound: Duration = .seconds(15)

    @Test(.timeLimit(.minutes(5)))
    func aStandbyTakesOverFromALeaderBehindABlackHoleAndTheOldLeaderComesBackAsAFollower() async throws {
        try await Self.onACluster(Self.run)
    }

    /// A cluster of the test's own, listening on 127.0.0.1 and 127.0.0.2, for `body`; its log joins a failure.
    static func onACluster(_ body: (PostgresCluster) async throws -> Void) async throws {
        let binaries = try #require(
            PostgresCluster.binaryFolder, "PostgreSQL server binaries (initdb, pg_ctl, postgres) not found: install postgresql")
        _ = try BlackHole.tool()
        let folder = try PostgresCluster.makeFolder(prefix: "upshift-host-loss")
        let cluster = PostgresCluster(folder: folder.appendingPathComponent("data"), port: try await freePort(), binaries: binaries)
        let outcome: Result<Void, any Error>
        do {
            try await cluster.initialize(settings: ["listen_addresses = '127.0.0.1,127.0.0.2'", "max_connections = 120"])
            try await cluster.start()
            outcome = .success(try await body(cluster))
        } catch {
            outcome = .failure(error)
        }
        if await cluster.isRunning() { try? await cluster.stop(mode: "immediate") }
        PostgresCluster.removeFolder(folder)
        if case .failure(let error) = outcome {
            Issue.record("PostgreSQL log:\n\(cluster.logTail())")
            throw error
        }
    }

    /// A webhook delivery in flight when its instance's host vanishes: the instance lets go of the
    /// delivery's lock when its heartbeat goes unanswered and never records the attempt; the other
    /// instance ends the silent session, takes the lock, and sends the delivery again with the same
    /// `Upshift-Delivery`, which the receiver answers 2xx and the other instance records.
    @Test(.timeLimit(.minutes(5)))
    func aWebhookInFlightBehindABlackHoleIsSentAgainByTheOtherInstance() async throws {
        try await Self.onACluster { cluster in
            try await ReplicaReportsTests.execute(cluster.settings(database: "postgres"), "CREATE DATABASE upshift")
            let harness = try await ReplicaReportsTests.harness(on: cluster.settings(), now: Date())
            var far = cluster.settings()
            far.host = "127.0.0.2"
            let environment = ["UPSHIFT_WEBHOOK_ALLOW_HTTP": "1", "UPSHIFT_WEBHOOK_ALLOW_PRIVATE": "1"]
            let a = try ServerProcess(database: far, port: try await freePort(), extraEnvironment: environment)
            let b = try ServerProcess(database: harness.database, port: try await freePort(), extraEnvironment: environment)
            let serverA = Server(port: a.port), serverB = Server(port: b.port)
            try await WebhookReceiver.run { receiver in
                try await a.start()
                // A alone sends the first attempt, whose answer the receiver holds past the cut.
                receiver.hold([.seconds(30)])
                let created = try await WebhookTests.subscribe(
                    serverA, harness, url: "http://127.0.0.1:\(receiver.port)/hook", kinds: ["release.changed"])
                #expect(created.status == 201, "\(created.text)")
                let id = try #require(try created.value()["id"]?.stringValue)
                let queued = try await serverA.send(.POST, "/v1/apps/expenses/webhooks/\(id)/test", key: harness.adminKey)
                let delivery = try #require(try queued.value()["delivery"]?.stringValue)
                _ = try await receiver.waitFor(1, timeout: .seconds(30))
                try await b.start()
                let hole = try await BlackHole.drop(address: "127.0.0.2", port: cluster.port)
                do {
                    try await TwoInstancesTests.waitUntil("B sends the delivery again", within: .seconds(60), log: b) {
                        receiver.received.count >= 2
                    }
                    try await TwoInstancesTests.waitUntil("B records it delivered", within: .seconds(30), log: b) {
                        let list = try await serverB.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey)
                        return try list.value()["deliveries"]?.arrayValue?.first?["state"] == "delivered"
                    }
                } catch {
                    try? await hole.lift()
                    throw error
                }
                try await hole.lift()
                let list = try await serverB.send(.GET, "/v1/apps/expenses/webhooks/\(id)/deliveries", key: harness.adminKey).value()
                let attempts = list["deliveries"]?.arrayValue?.first?["attempts"]?.arrayValue ?? []
                #expect(attempts.count == 1 && attempts.first?["status"] == .number(200), "A's attempt is never recorded: \(attempts)")
                #expect(receiver.received.count == 2 && receiver.received.allSatisfy { $0.delivery == delivery })
                // The webhooks' lock changed hands by the heartbeat's fencing, from both sides.
                func logged(_ process: ServerProcess, _ message: String) -> Bool {
                    process.log().split(separator: "\n").contains { $0.contains(message) && $0.contains("upshift-webhooks") }
                }
                #expect(logged(a, "leader lost its database connection"), "A's log: \(a.log().suffix(3000))")
                #expect(logged(b, "ended the session of a leader that stopped answering"), "B's log: \(b.log().suffix(3000))")
                #expect(await a.terminate() == 0)
                #expect(await b.terminate() == 0)
            }
        }
    }

    static func run(_ cluster: PostgresCluster) async throws {
        try await ReplicaReportsTests.execute(cluster.settings(database: "postgres"), "CREATE DATABASE upshift")
        let now = Date()
        let harness = try await ReplicaReportsTests.harness(on: cluster.settings(), now: now)
        var far = cluster.settings()
        far.host = "127.0.0.2"
        let a = try ServerProcess(database: far, port: try await freePort())
        let b = try ServerProcess(database: harness.database, port: try await freePort())
        let serverA = Server(port: a.port), serverB = Server(port: b.port)
        let every = Dictionary(uniqueKeysWithValues: Projections.all.map { ($0.name, 1.0) })
        let none = Dictionary(uniqueKeysWithValues: Projections.all.map { ($0.name, 0.0) })
        try await a.start()
        try await TwoInstancesTests.waitUntil("A leads every projection and the rollout worker", within: .seconds(60), log: a) {
            let leads = try await TwoInstancesTests.leading(serverA) == every
            let rollout = try await TwoInstancesTests.rolloutLockHolders(harness)
            return leads && rollout.count == 1
        }
        try await b.start()

        // Events through both, then the projections caught up by A.
        let fleet = TwoInstancesTests.fleet(now: now, installs: 120)
        let half = fleet.count / 2
        for (index, start) in stride(from: 0, to: half, by: 100).enumerated() {
            let server = index % 2 == 0 ? serverA : serverB
            #expect(try await server.postEvents(Array(fleet[start..<min(start + 100, half)]), key: harness.ingestKey).status == 200)
        }
        try await harness.waitForProjections(timeout: .seconds(60))
        let before = try await TwoInstancesTests.lockHolders(harness)
        let rolloutBefore = try await TwoInstancesTests.rolloutLockHolders(harness)
        #expect(before.values.allSatisfy { $0.count == 1 } && before.count == Projections.all.count)
        #expect(try await TwoInstancesTests.leading(serverB) == none)
        let leaderSessions = Set(before.values.joined()).union(rolloutBefore)

        // The black hole: A's host is gone as far as PostgreSQL and A can tell.
        let hole = try await BlackHole.drop(address: "127.0.0.2", port: cluster.port)
        let cut = ContinuousClock.now
        var takeover: Duration?
        do {
            while ContinuousClock.now - cut < takeoverBound {
                let holders = try await TwoInstancesTests.lockHolders(harness)
                let rollout = try await TwoInstancesTests.rolloutLockHolders(harness)
                if holders.count == Projections.all.count,
                    holders.values.allSatisfy({ $0.count == 1 && leaderSessions.isDisjoint(with: $0) }),
                    rollout.count == 1, !leaderSessions.contains(rollout[0]),
                    try await TwoInstancesTests.leading(serverB) == every
                {
                    takeover = ContinuousClock.now - cut
                    break
                }
                try await Task.sleep(for: .milliseconds(100))
            }
            #expect(
                takeover != nil,
                "B did not take over every projection and the rollout worker within \(takeoverBound): \(b.log().suffix(3000))")
            print(
                "HostLossTests: with A's packets black-holed, B led every projection and the rollout worker after "
                    + "\(takeover.map(TwoInstancesTests.milliseconds) ?? "more than \(takeoverBound)")")
            // Both sides of the heartbeat did it: A let go, B ended A's idle sessions.
            #expect(a.log().contains("leader lost its database connection"), "A's log: \(a.log().suffix(3000))")
            #expect(b.log().contains("ended the session of a leader that stopped answering"), "B's log: \(b.log().suffix(3000))")

            // B serves on: the rest of the events, and a schedule whose steps its worker writes.
            for start in stride(from: half, to: fleet.count, by: 100) {
                #expect(try await serverB.postEvents(Array(fleet[start..<min(start + 100, fleet.count)]), key: harness.ingestKey).status == 200)
            }
            let scheduled = try await serverB.send(
                .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                json: .object([
                    "platform": .string("ios"), "version": .string("2.0.0"), "releasedAt": .string(Timestamp.format(now)),
                    "rolloutSchedule": .array([
                        .object(["percent": .number(10), "afterHours": .number(0)]),
                        .object(["percent": .number(100), "afterHours": .number(0.001)]),  // 3.6 s
                    ]),
                ]))
            #expect(scheduled.status == 201, "\(scheduled.text)")
            try await TwoInstancesTests.waitUntil("the schedule's last step, written by B's worker", within: .seconds(20), log: b) {
                try await serverB.send(.GET, "/v1/apps/expenses/releases/ios/2.0.0", key: harness.readKey).value()["rolloutPercent"]
                    == .number(100)
            }
        } catch {
            try? await hole.lift()
            throw error
        }

        // Packets flow again: A reconnects and stands by.
        try await hole.lift()
        try await TwoInstancesTests.waitUntil("A answers ready again", within: .seconds(30), log: a) {
            (try? await serverA.request(.GET, "/health/ready", timeout: .seconds(2)).status) == 200
        }
        try await Task.sleep(for: .seconds(3))  // several of A's standby rounds
        #expect(try await TwoInstancesTests.leading(serverA) == none, "A leads again: \(a.log().suffix(3000))")
        #expect(try await TwoInstancesTests.leading(serverB) == every)
        #expect(try await TwoInstancesTests.lockHolders(harness).values.allSatisfy { $0.count == 1 })
        // Only the leader exports the projections' lag: A's figures from before the cut are gone.
        let metricsA = String(decoding: try await serverA.request(.GET, "/metrics").body, as: UTF8.self)
        let metricsB = String(decoding: try await serverB.request(.GET, "/metrics").body, as: UTF8.self)
        #expect(!metricsA.contains("upshift_projection_lag_"), "A, a follower, exports lag gauges")
        #expect(metricsB.contains("upshift_projection_lag_events{projection=\"adoption\"}"))

        // Nothing applied twice: every event stored once, the projections equal a rebuild, and each of
        // the schedule's steps written once.
        let clientEvents = "FROM event_log WHERE type <> 'checked' AND install_id IS NOT NULL"
        #expect(try await harness.count("SELECT count(*)::int \(unescaped: clientEvents)") == fleet.count)
        #expect(try await harness.count("SELECT count(DISTINCT event_id)::int \(unescaped: clientEvents)") == fleet.count)
        try await harness.waitForProjections(timeout: .seconds(60))
        try await harness.expectRebuildEqualsActiveTables()
        let steps = try await harness.count(
            """
            SELECT count(*)::int FROM event_log WHERE stream_id = 'app:expenses' AND data->>'actor' = 'schedule'
              AND data->'release'->>'version' = '2.0.0'
            """)
        #expect(steps == 1, "schedule writes for 2.0.0: \(steps)")
        #expect(await a.terminate() == 0)
        #expect(await b.terminate() == 0)
    }
}
