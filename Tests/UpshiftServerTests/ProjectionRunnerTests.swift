import Foundation
import PostgresNIO
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// The projection runner on a real PostgreSQL: exactly-once under interruptions, one active runner
/// among several, rebuilds equal to incremental processing, late commits and poison events.
@Suite(.tags(.timed), .serverTimeLimit) struct ProjectionRunnerTests {
    @Test func interruptedBatchesLeaveTheTablesOfACleanRebuild() async throws {
        let (harness, events) = try await loggedFleet()
        let calls = Mutex(0)
        let failures = Mutex(0)
        let configuration = harness.smallBatchRunner { _ in
            let call = calls.withLock { $0 += 1; return $0 }
            if [4, 11, 20, 30].contains(call) {
                failures.withLock { $0 += 1 }
                throw InjectedFailure()  // the batch's writes and checkpoint roll back together
            }
        }
        // Run until some batches are in, then stop between (or inside) batches, then run to the end.
        try await harness.run(configuration) { (_: Server) async throws in
            while calls.withLock({ $0 }) < 40 { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(try await harness.appliedEvents() < events.count * Projections.all.count, "stopped before the end")
        try await harness.run(configuration) { (_: Server) async throws in try await harness.waitForProjections() }
        #expect(failures.withLock { $0 } == 4)

        try await harness.expectAdoptionMatchesTheLog()
        try await harness.expectRebuildEqualsActiveTables()
    }

    @Test func aConnectionCutBeforeCommitLosesNothingAndCountsNothingTwice() async throws {
        let (harness, _) = try await loggedFleet()
        let calls = Mutex(0)
        let cuts = Mutex(0)
        let configuration = harness.smallBatchRunner { name in
            let call = calls.withLock { $0 += 1; return $0 }
            // A cut is reserved before it is made (the projections' hooks run concurrently, and two
            // must not both take the last one), and given back when it is not made.
            let reserved = call % 3 == 0 && cuts.withLock { cuts in
                guard cuts < 3 else { return false }
                cuts += 1
                return true
            }
            guard reserved else { return }
            // The server ends the runner's session (as a restart or a failover would) after the
            // batch's writes, before its commit. On a loaded machine the look-up of the leader can
            // miss (its own connection slow to open): the next third call tries again.
            do {
                // In a task of its own: the termination makes the runner abandon (cancel) this batch,
                // hook included, and the answer must still be counted.
                guard try await Task(operation: { try await harness.terminateLeader(of: name) }).value else {
                    print("ProjectionRunnerTests: no leader of \(name) found at call \(call)")
                    cuts.withLock { $0 -= 1 }
                    return
                }
            } catch {
                print("ProjectionRunnerTests: no cut at call \(call) of \(name): \(String(reflecting: error))")
                cuts.withLock { $0 -= 1 }
            }
        }
        let later = sampleFleet(now: harness.clock.now().addingTimeInterval(86_400), installs: 60)
        // A bound on a hang, not on speed: alone this takes 13 s, beside the other timed suites over 60 s.
        try await harness.run(configuration) { (_: Server) async throws in
            try await harness.waitForProjections(timeout: .seconds(150))
            // Sessions ended while the runners wait for events: the next read notices and reconnects.
            for projection in Projections.all {
                #expect(try await harness.terminateLeader(of: projection.name), "\(projection.name) had a leader")
            }
            try await postFleet(later, harness: harness, roles: [.http])
            try await harness.waitForProjections(timeout: .seconds(150))
        }
        #expect(cuts.withLock { $0 } == 3)
        try await harness.expectAdoptionMatchesTheLog()
        try await harness.expectRebuildEqualsActiveTables()
    }

    @Test func aFirstStartOnAFullLogCatchesUpSetBasedThenFollowsTheFeed() async throws {
        let (harness, events) = try await loggedFleet()
        let batches = Mutex(0)
        var configuration = harness.smallBatchRunner { _ in batches.withLock { $0 += 1 } }
        configuration.roles = [.http, .projections]
        configuration.projections.backfillThreshold = events.count / 2  // the log holds more than that
        configuration.projections.backfillChunkEvents = events.count / 3
        let later = sampleFleet(now: harness.clock.now().addingTimeInterval(86_400), installs: 60)
        try await harness.run(configuration) { (server: Server) async throws in
            try await harness.waitForProjections(timeout: .seconds(60))
            // Set-based, not in batches. (An open transaction of a test running beside this one can hold
            // back the horizon, cluster-wide: the runner waits until fewer than the threshold lie beyond it.)
            // At most the events beyond the horizon go in batches, for each projection: all in batches
            // would take twice as many.
            let inBatches = batches.withLock { $0 }
            let bound = Projections.all.count * (events.count / 2 / 97 + 1)
            #expect(inBatches <= bound, "\(inBatches) batches of 97 for \(events.count) events")
            for chunk in stride(from: 0, to: later.count, by: 250) {
                let reply = try await server.postEvents(Array(later[chunk..<min(chunk + 250, later.count)]), key: harness.ingestKey)
                #expect(reply.status == 200)
            }
            try await harness.waitForProjections(timeout: .seconds(60))
            #expect(batches.withLock { $0 } > 0, "new events were applied in batches")
        }
        try await harness.expectAdoptionMatchesTheLog()
        // Backfill, then batches, equals batches alone.
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }

    @Test func twoRunnersNeverDoubleCountAndAStandbyTakesOver() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let events = sampleFleet(now: now)
        let half = events.count / 2
        var configuration = harness.configuration()
        configuration.projections.batchSize = 50
        configuration.projections.standbyInterval = .milliseconds(200)
        let both = configuration
        try await harness.run(both) { (second: Server) async throws in
            try await harness.run(both) { (first: Server) async throws in
                for chunk in stride(from: 0, to: half, by: 200) {
                    let server = chunk / 200 % 2 == 0 ? first : second
                    let reply = try await server.postEvents(Array(events[chunk..<min(chunk + 200, half)]), key: harness.ingestKey)
                    #expect(reply.status == 200)
                }
                try await harness.waitForProjections()
            }
            // The first instance is gone: whichever projections it led, the second takes over.
            let started = ContinuousClock.now
            for chunk in stride(from: half, to: events.count, by: 200) {
                let reply = try await second.postEvents(Array(events[chunk..<min(chunk + 200, events.count)]), key: harness.ingestKey)
                #expect(reply.status == 200)
            }
            try await harness.waitForProjections(timeout: .seconds(30))
            #expect(ContinuousClock.now - started < .seconds(30))
        }
        try await harness.expectAdoptionMatchesTheLog()
        try await harness.expectRebuildEqualsActiveTables()
    }

    @Test func eventsCommittedOutOfPositionOrderAreAllCounted() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let early = UUID(), late = UUID()
        try await harness.run { (server: Server) async throws in
            try await harness.waitForProjections()
            try await harness.sql { client in
                try await client.withTransaction(logger: TestEnvironment.logger) { first in
                    // The first transaction takes the lower position, the second commits first.
                    try await insertEvent(on: first, app: harness.appId, install: early, at: now, version: "1.0.0")
                    try await client.withTransaction(logger: TestEnvironment.logger) { second in
                        try await insertEvent(on: second, app: harness.appId, install: late, at: now, version: "1.1.0")
                    }
                    try await Task.sleep(for: .milliseconds(800))  // the runners poll meanwhile
                }
            }
            try await harness.waitForProjections()
            let positions = try await harness.sql { client in
                var result: [UUID: Int64] = [:]
                for try await (install, position) in try await client.query(
                    "SELECT install_id, position FROM event_log WHERE install_id IS NOT NULL"
                ).decode((UUID, Int64).self) { result[install] = position }
                return result
            }
            #expect(positions[early]! < positions[late]!)
            let report = try await server.send(
                .GET, "/v1/apps/\(harness.appId)/reports/adoption?platform=ios&from=\(UTCDay(now))&to=\(UTCDay(now))",
                key: harness.readKey)
            #expect(report.status == 200)
            let day = try #require(try report.decode(AdoptionBody.self).days.first)
            #expect(day.activeInstalls == 2)
            #expect(day.versions.map(\.version) == ["1.0.0", "1.1.0"])
        }
    }

    @Test func aPoisonEventIsDeadLetteredAndTheRunnerGoesOn() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        // Days up to 31 before the latest recorded_at are open, older ones closed: an event of a closed
        // day is not counted (written around the API, which refuses events over 30 days old).
        let (open, old) = (now.addingTimeInterval(-31 * 86_400), now.addingTimeInterval(-40 * 86_400))
        try await harness.sql { client in
            _ = try await EventLog(client: client, logger: TestEnvironment.logger).ensurePartitions(now: old)
        }
        try await harness.run { (server: Server) async throws in
            let good = UUID()
            #expect(try await server.postEvents([clientEvent(occurredAt: now, install: good)], key: harness.ingestKey).status == 200)
            try await harness.sql { client in
                try await client.withConnection { connection in
                    for date in [open, old] {
                        try await insertEvent(
                            on: connection, app: harness.appId, install: UUID(), at: date, recordedAt: now, version: "1.0.0")
                    }
                    // Written around the API's validation, as a broken importer might.
                    try await insertEvent(on: connection, app: harness.appId, install: UUID(), at: now, version: "one.two")
                    try await insertEvent(
                        on: connection, app: harness.appId, install: UUID(), at: now, version: "1.0.0", type: "prompt_shown",
                        data: #"{"promptKind": "soft", "targetVersion": "latest"}"#)
                }
            }
            let after = UUID()
            let afterReply = try await server.postEvents([clientEvent(occurredAt: now, install: after)], key: harness.ingestKey)
            #expect(afterReply.status == 200, "\(afterReply.text)")
            try await harness.waitForProjections()

            let letters = try await harness.sql { client in
                var result: [String: [String]] = [:]
                for try await (name, error) in try await client.query(
                    "SELECT name, error FROM projection_dead_letters ORDER BY name, position"
                ).decode((String, String).self) { result[name, default: []].append(error) }
                return result
            }
            // Each projection dead-letters what it needs and cannot read (release cohorts track no release here).
            for name in ["install_state", "adoption"] {
                #expect(letters[name]?.contains { $0.contains("'one.two' is not a version") } == true, "\(name): \(letters[name] ?? [])")
            }
            #expect(letters["prompt_funnel"]?.contains { $0.contains("targetVersion 'latest'") } == true)
            // The good events on both sides of the poison are counted.
            let report = try await server.send(
                .GET, "/v1/apps/\(harness.appId)/reports/adoption?platform=ios&from=\(UTCDay(now))&to=\(UTCDay(now))",
                key: harness.readKey)
            let day = try #require(try report.decode(AdoptionBody.self).days.first)
            #expect(day.activeInstalls == 3)  // two good installs and the valid prompt_shown's install
            for (date, installs) in [(open, 1), (old, 0)] {
                let late = try await server.send(
                    .GET, "/v1/apps/\(harness.appId)/reports/adoption?platform=ios&from=\(UTCDay(date))&to=\(UTCDay(date))",
                    key: harness.readKey)
                #expect(try late.decode(AdoptionBody.self).days.first?.activeInstalls ?? 0 == installs, "\(late.text)")
            }
        }
        // A set-based rebuild dead-letters the same events, with the same errors.
        try await harness.expectRebuildEqualsActiveTables(requireRows: false)
    }
}

extension ProjectionRunnerTests {
    /// A catch-up that stops after some of its steps (its time limit, a lost connection, a restart) goes
    /// on from the last step it committed, not from the start, and ends with the tables of one that ran
    /// through.
    @Test func aStoppedCatchUpContinuesAfterItsLastCommittedStep() async throws {
        let (harness, events) = try await loggedFleet()
        let seen = Mutex<[String: [Int]]>([:])
        let stopped = Mutex(Set<String>())
        var configuration = harness.configuration()
        configuration.roles = [.projections]
        configuration.projections.backfillThreshold = 1
        configuration.projections.backfillChunkEvents = events.count / 4
        configuration.projections.afterBackfillStep = { projection, _, number in
            seen.withLock { $0[projection, default: []].append(number) }
            // Each projection's first attempt stops after its third step.
            if number == 3, stopped.withLock({ $0.insert(projection).inserted }) { throw InjectedFailure() }
        }
        try await harness.run(configuration) { (_: Server) async throws in
            try await harness.waitForProjections(timeout: .seconds(120))
        }
        let steps = seen.withLock { $0 }
        #expect(steps.keys.sorted() == Projections.all.map(\.name).sorted())
        for (projection, numbers) in steps {
            // Every step committed once, in order: the second attempt began with the fourth.
            #expect(numbers == Array(1...numbers.count), "\(projection): \(numbers)")
            #expect(numbers.count > 3, "\(projection): \(numbers)")
        }
        #expect(try await harness.count("SELECT count(*) FROM projections WHERE backfill_tx IS NOT NULL") == 0)
        try await harness.expectAdoptionMatchesTheLog()
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }

    /// A step that writes a row per install goes in several transactions, none holding a transaction id
    /// for long; a catch-up that stops between two of them (half a step written) clears that step on
    /// its next attempt and ends with the tables of one that ran through: no row twice, none missing,
    /// each day counted once.
    @Test func aCatchUpStoppedWithinAStepRewritesThatStep() async throws {
        let (harness, events) = try await loggedFleet()
        let writes = Mutex<[String: Int]>([:])
        let stopped = Mutex(Set<String>())
        var configuration = harness.configuration()
        configuration.roles = [.projections]
        configuration.projections.backfillThreshold = 1
        configuration.projections.backfillChunkEvents = events.count / 2
        configuration.projections.backfillRowsPerWrite = 7
        configuration.projections.afterBackfillWrite = { projection, _ in
            let count = writes.withLock { writes -> Int in
                writes[projection, default: 0] += 1
                return writes[projection]!
            }
            // Each projection's first attempt stops after the third write of some step, within it.
            if count == 3, stopped.withLock({ $0.insert(projection).inserted }) { throw InjectedFailure() }
        }
        try await harness.run(configuration) { (_: Server) async throws in
            try await harness.waitForProjections(timeout: .seconds(120))
        }
        #expect(stopped.withLock { $0 } == Set(Projections.all.map(\.name)))
        #expect(try await harness.count("SELECT count(*) FROM projections WHERE backfill_tx IS NOT NULL") == 0)
        try await harness.expectAdoptionMatchesTheLog()
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }

    /// A rebuild (a generation built beside the one that serves) rests after each step of its catch-up,
    /// here 4 times as long as the step took: its connection idles through the rest, and its heartbeat
    /// goes on there. Read as one busy statement, a rest past 2 s looked like a lost session: the leader
    /// let go of its lock, closed its connection and the rebuild failed.
    @Test func aRebuildRestingLongerThanAHeartbeatAllowsKeepsItsLead() async throws {
        // A small log: every step rests 4 times as long as it took, and only one needs to be slow.
        let harness = try await Harness.make()
        try await postFleet(sampleFleet(now: harness.clock.now(), installs: 30), harness: harness, roles: [.http])
        let slowed = Mutex(false)
        try await harness.sql { client in
            let store = ProjectionStore(client: client, logger: TestEnvironment.logger)
            var settings = ProjectionSettings()
            settings.backfillThreshold = 0
            settings.backfillRowsPerWrite = 7
            settings.rebuildRest = 4
            settings.afterBackfillWrite = { _, _ in
                // One write takes 1.5 s (an idle connection for less than 2 s): its step rests 6 s or more.
                guard slowed.withLock({ slowed in defer { slowed = true }; return !slowed }) else { return }
                try await Task.sleep(for: .milliseconds(1_500))
            }
            let runner = ProjectionRunner(store: store, settings: settings, logger: TestEnvironment.logger)
            let adoption = try #require(Projections.named("adoption"))
            let started = ContinuousClock.now
            let rebuilt = try await runner.rebuild(adoption) { _ in }
            #expect(rebuilt.state == .active)
            #expect(slowed.withLock { $0 })
            #expect(ContinuousClock.now - started > .seconds(7), "the rest after the slow step did not happen")
        }
        try await harness.expectAdoptionMatchesTheLog()
    }

    /// A leader that works on a batch between its statements for seconds (here 7 s before its commit, as
    /// folding a release's week of events takes on a loaded machine) keeps its lead and commits: its session
    /// is idle in its transaction meanwhile, but no statement of it waits for PostgreSQL, so its heartbeat
    /// asks nothing. Taken for a half-open connection, it was closed after about 5.5 s and the batch rolled
    /// back, again at every retry: a batch that always takes that long was never applied.
    @Test func aLeaderWorkingOnABatchForSecondsKeepsItsLeadAndCommits() async throws {
        let harness = try await Harness.make()
        let slow = Mutex(false)
        let slowed = Mutex(0)
        var configuration = harness.configuration()
        configuration.projections.beforeCommit = { name in
            guard name == "adoption", slow.withLock({ $0 }) else { return }
            try await Task.sleep(for: .seconds(7))
            slowed.withLock { $0 += 1 }
        }
        try await harness.run(configuration) { server in
            let fleet = sampleFleet(now: harness.clock.now(), installs: 5)
            #expect(try await server.postEvents(Array(fleet.prefix(10)), key: harness.ingestKey).status == 200)
            try await harness.waitForProjections(timeout: .seconds(60))
            let leader = try await harness.leaderSession(of: "adoption")
            #expect(leader != 0)
            slow.withLock { $0 = true }
            #expect(try await server.postEvents(Array(fleet.dropFirst(10).prefix(10)), key: harness.ingestKey).status == 200)
            try await Waits.until("the slowed batch committed", timeout: .seconds(60)) { slowed.withLock { $0 } > 0 }
            slow.withLock { $0 = false }
            try await harness.waitForProjections(timeout: .seconds(60))
            #expect(try await harness.leaderSession(of: "adoption") == leader, "the leader let go of its session")
        }
        try await harness.expectAdoptionMatchesTheLog()
    }

    /// Each app's days close by its own events' recorded times: an app whose devices report weeks behind
    /// another's keeps its days open (with one horizon for the whole log, the busy app's events of today
    /// would have closed them before they were read).
    @Test func eachAppClosesItsDaysByItsOwnEvents() async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        let (then, later) = (now.addingTimeInterval(-40 * 86_400), now.addingTimeInterval(-39 * 86_400))
        try await harness.sql { client in
            _ = try await EventLog(client: client, logger: TestEnvironment.logger).ensurePartitions(now: then)
            _ = try await CatalogStore(client: client, logger: TestEnvironment.logger).createApp(
                AppInfo(id: "archive", name: "Archive"), actor: "tests", reason: nil, now: then)
        }
        try await harness.run { (server: Server) async throws in
            #expect(try await server.postEvents([clientEvent(occurredAt: now, install: UUID())], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            // After the busy app's event of today: the other app's event of 40 days ago, delivered a day late.
            try await harness.sql { client in
                try await client.withConnection { connection in
                    try await insertEvent(
                        on: connection, app: "archive", install: UUID(), at: then, recordedAt: later, version: "1.0.0")
                }
            }
            try await harness.waitForProjections()
            let report = try await server.send(
                .GET, "/v1/apps/archive/reports/adoption?platform=ios&from=\(UTCDay(then))&to=\(UTCDay(then))",
                key: harness.readKey)
            #expect(try report.decode(AdoptionBody.self).days.first?.activeInstalls == 1, "\(report.text)")
        }
        try await harness.expectRebuildEqualsActiveTables(requireRows: false)
    }
}

struct InjectedFailure: Error {}

struct AdoptionBody: Decodable {
    struct Day: Decodable {
        struct Cell: Decodable {
            var version: String
            var installs: Int
        }
        var day: String
        var activeInstalls: Int
        var versions: [Cell]
    }
    var days: [Day]
}

/// A harness whose log holds `sampleFleet`, posted with the projection runner off.
private func loggedFleet() async throws -> (Harness, [[String: String]]) {
    let harness = try await Harness.make()
    let events = sampleFleet(now: harness.clock.now())
    try await postFleet(events, harness: harness, roles: [.http])
    return (harness, events)
}

extension Harness {
    /// A server that only runs projections, in small batches, calling `beforeCommit` in each.
    func smallBatchRunner(beforeCommit: @escaping @Sendable (String) async throws -> Void) -> AppConfiguration {
        var configuration = configuration()
        configuration.roles = [.projections]
        configuration.projections.batchSize = 97
        configuration.projections.batchTimeout = .seconds(10)
        configuration.projections.standbyInterval = .milliseconds(100)
        configuration.projections.beforeCommit = beforeCommit
        return configuration
    }
}

/// Posts `events` to a server of `roles` on `harness`, in batches.
func postFleet(_ events: [[String: String]], harness: Harness, roles: Set<ServerRole>) async throws {
    var configuration = harness.configuration()
    configuration.roles = roles
    try await harness.run(configuration) { (server: Server) async throws in
        for chunk in stride(from: 0, to: events.count, by: 250) {
            let reply = try await server.postEvents(Array(events[chunk..<min(chunk + 250, events.count)]), key: harness.ingestKey)
            #expect(reply.status == 200)
        }
    }
}

extension Harness {
    /// Terminates the backend that holds the runner lock of `projection`'s active or building
    /// generation. True when one was terminated.
    func terminateLeader(of projection: String) async throws -> Bool {
        try await overLeader(of: projection, "count(*) FILTER (WHERE pg_terminate_backend(l.pid))::int8") > 0
    }

    /// The process id of the session leading `projection`'s current generation (0: none leads it).
    func leaderSession(of projection: String) async throws -> Int {
        try await overLeader(of: projection, "coalesce(max(l.pid), 0)::int8")
    }

    /// `expression` over the sessions holding the lock of `projection`'s generations that are not retired.
    private func overLeader(of projection: String, _ expression: String) async throws -> Int {
        try await count(
            """
            SELECT \(unescaped: expression)
            FROM projections p JOIN pg_locks l ON l.locktype = 'advisory' AND l.database = (
                    SELECT oid FROM pg_database WHERE datname = current_database())
                AND ((l.classid::int8 << 32) | l.objid::int8)
                    = hashtextextended('upshift:projection:' || p.name || ':' || p.generation, 0)
            WHERE p.name = \(projection) AND p.state <> 'retired'
            """)
    }

    /// Events applied, summed over the active generations.
    func appliedEvents() async throws -> Int {
        try await count("SELECT coalesce(sum(events), 0)::int8 FROM projections WHERE state = 'active'")
    }

    /// Each day's active installs in `adoption_daily` equal the distinct installs of that day in the log.
    func expectAdoptionMatchesTheLog() async throws {
        let generation = try await count("SELECT generation::int8 FROM projections WHERE name = 'adoption' AND state = 'active'")
        let mismatches = try await count(
            """
            SELECT count(*)::int8 FROM (
                SELECT (occurred_at AT TIME ZONE 'UTC')::date AS day, count(DISTINCT install_id)::int8 AS installs
                FROM event_log WHERE install_id IS NOT NULL GROUP BY 1
            ) l FULL JOIN (
                SELECT day, sum(installs)::int8 AS installs FROM \(ProjectionTables.name("adoption_daily", generation: generation)) GROUP BY 1
            ) a USING (day)
            WHERE l.installs IS DISTINCT FROM a.installs
            """)
        #expect(mismatches == 0)
        #expect(try await count("SELECT count(*)::int8 FROM \(ProjectionTables.name("adoption_daily", generation: generation))") > 10)
    }

    /// Rebuilds every projection from the start of the log, set-based (`backfill`) or in batches, and
    /// compares every table and the dead letters, row for row, with what the runner built before.
    /// With `requireRows`, every table but the release and dead-letter ones must have rows (a fleet's).
    func expectRebuildEqualsActiveTables(backfill: Bool = true, requireRows: Bool = true) async throws {
        let incremental = try await projectionTables()
        // Many install ranges (at least 20): their steps must add up to one pass. Each range's statements scan
        // the whole log (no index leads with the install id), so 97 events a range made the rebuild of
        // ReportGroundTruthTests' 50,000 events take 5.5 minutes; twenty ranges take 26 s.
        let chunk = max(97, try await count("SELECT count(*)::int8 FROM event_log") / 20)
        try await sql { client in
            let store = ProjectionStore(client: client, logger: TestEnvironment.logger)
            var settings = ProjectionSettings()
            settings.backfillThreshold = backfill ? 0 : nil
            settings.backfillChunkEvents = chunk
            let runner = ProjectionRunner(store: store, settings: settings, logger: TestEnvironment.logger)
            for definition in Projections.all {
                let rebuilt = try await runner.rebuild(definition) { _ in }
                #expect(rebuilt.state == .active)
            }
        }
        let rebuilt = try await projectionTables()
        #expect(incremental.keys.sorted() == rebuilt.keys.sorted())
        for (table, rows) in incremental {
            #expect(
                !requireRows || !rows.isEmpty || ["release_cohorts", "release_installs", "release_updates", "dead letters"].contains(table), "\(table) is empty")
            #expect(rows == rebuilt[table], "\(table): \(rows.count) incremental rows, \(rebuilt[table]?.count ?? 0) rebuilt")
        }
    }

    /// The rows of every active projection table, as sorted JSON lines, by base table name.
    func projectionTables() async throws -> [String: [String]] {
        try await sql { client in
            var generations: [String: Int] = [:]
            for try await (name, generation) in try await client.query(
                "SELECT name, generation FROM projections WHERE state = 'active'"
            ).decode((String, Int).self) { generations[name] = generation }
            var tables: [String: [String]] = [:]
            for definition in Projections.all {
                let generation = try #require(generations[definition.name])
                for base in definition.tables {
                    var rows: [String] = []
                    for try await row in try await client.query(
                        "SELECT row_to_json(t)::text FROM \(ProjectionTables.name(base, generation: generation)) t"
                    ).decode(String.self) { rows.append(row) }
                    tables[base] = rows.sorted()
                }
            }
            var letters: [String] = []
            for try await row in try await client.query(
                """
                SELECT d.name || ' ' || d.tx_id || ' ' || d.position || ' ' || d.event_id || ' ' || d.type || ' ' || d.error
                FROM projection_dead_letters d JOIN projections p USING (name, generation) WHERE p.state = 'active'
                """
            ).decode(String.self) { letters.append(row) }
            tables["dead letters"] = letters.sorted()
            return tables
        }
    }
}
