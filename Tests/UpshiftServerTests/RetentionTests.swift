import Foundation
import PostgresNIO
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport
import UpshiftWire

/// Retention of the log (docs/OPERATIONS.md, "Retention") through `serve` and the CLI: expired months are
/// archived, checked, detached and dropped with their event ids while the reports keep their figures and
/// the catalog its history; a month waits for a projection that has not applied it and for an export
/// folder that fails; an export cursor before the drop is `410`; a rebuild that would count fewer months
/// is switched in only when the operator accepts it. It holds a projection's write transaction open for
/// seconds (its transaction id holds back every feed of the cluster) and a reader against a detach: alone.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct RetentionTests {
    static func at(_ text: String) -> Date { Timestamp.parse(text)! }

    static func folder() throws -> URL {
        let folder = TestEnvironment.scratch("retention-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return folder
    }

    static func partitionExists(_ harness: Harness, _ name: String) async throws -> Bool {
        try await harness.count("SELECT (to_regclass(\(name)) IS NOT NULL)::int::int8") == 1
    }

    /// Whether `sha256sum -c` accepts the checksum file, run on a thread of its own (a process waited for on
    /// the concurrency pool's few threads would hold back every server of the run).
    static func sha256sumAccepts(_ checksum: String, in folder: URL) async throws -> Bool {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        let check = Process()
                        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                        check.arguments = ["sha256sum", "-c", checksum]
                        check.currentDirectoryURL = folder
                        check.standardOutput = FileHandle.nullDevice
                        try check.run()
                        check.waitUntilExit()
                        return check.terminationStatus == 0
                    })
            }.start()
        }
    }

    /// A log on 2026-06-10 whose January holds one event.
    static func januaryWithOneEvent() async throws -> Harness {
        let harness = try await Harness.make(now: at("2026-06-10T12:00:00Z"))
        try await harness.sql { client in
            try await client.withConnection { connection in
                _ = try await connection.query("SELECT upshift_ensure_event_partitions('2026-01-01', '2026-01-01')", logger: TestEnvironment.logger)
                try await insertEvent(on: connection, app: "expenses", install: UUID(), at: at("2026-01-05T00:00:00Z"), version: "1.0")
            }
        }
        return harness
    }

    /// Runs `serve` with retention until January's table is gone.
    static func serveUntilJanuaryIsDropped(_ harness: Harness) async throws {
        let folder = try folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        try await harness.run(configuration(harness, folder: folder)) { _ in
            try await Waits.until("January's table dropped", timeout: .seconds(120)) {
                try await !partitionExists(harness, "event_log_y2026m01")
            }
        }
    }

    static func configuration(_ harness: Harness, folder: URL) -> AppConfiguration {
        var configuration = harness.configuration()
        var retention = RetentionSettings(months: 2, directory: folder)
        retention.interval = .milliseconds(300)
        retention.pruneBatch = 7  // several batches of the key walk
        configuration.retention = retention
        return configuration
    }

    @Test func expiredMonthsAreArchivedAndDroppedWhileReportsAndTheCatalogKeepWhatTheyHad() async throws {
        let harness = try await Harness.make(now: Self.at("2026-01-15T12:00:00Z"))
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let posted: [(String, Int)] = [
            ("2026-01-15T12:00:00Z", 6), ("2026-02-10T12:00:00Z", 4), ("2026-03-20T12:00:00Z", 5), ("2026-04-20T12:00:00Z", 3),
        ]
        // Posted month by month without retention, as the months went by.
        let early = try await harness.run { server in
            var cursor = "0:0"
            for (time, count) in posted {
                harness.clock.set(Self.at(time))
                try await harness.sql { client in
                    _ = try await client.query("SELECT upshift_ensure_event_partitions(\(Self.at(time)), \(Self.at(time)))")
                }
                var events = (0..<count).map { clientEvent(occurredAt: Self.at(time).addingTimeInterval(Double($0)), install: UUID()) }
                if time.hasPrefix("2026-01") {
                    // Two of January's installs on 2.0, one of which reports an abnormal exit: release health.
                    events[0]["appVersion"] = "2.0"
                    events[1]["appVersion"] = "2.0"
                    var exit = events[0]
                    exit["id"] = UUID().uuidString.lowercased()
                    exit["type"] = "abnormal_exit"
                    exit["occurredAt"] = Timestamp.format(Self.at(time).addingTimeInterval(60))
                    events.append(exit)
                }
                #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
                if time.hasPrefix("2026-01") {
                    // A policy written in January: the catalog's history and the rules read it after the drop.
                    let policy = try await server.send(
                        .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                        json: .object(["enabled": .bool(true), "minimumVersion": .string("1.0.0")]), headers: [("If-Match", "\"0\"")])
                    #expect(policy.status == 200, "\(policy.text)")
                    // And a release: the release report of a rebuilt generation still knows it.
                    let release = try await server.send(
                        .POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: DashboardTests.release("2.0"))
                    #expect(release.status == 201, "\(release.text)")
                    try await harness.waitForProjections()
                    let page = try await server.send(.GET, "/v1/apps/expenses/events/export?limit=3", key: harness.adminKey)
                    cursor = page.headers["Upshift-Cursor"].first ?? "0:0"
                }
            }
            try await harness.waitForProjections()
            return cursor
        }
        let januaryIds = try await harness.count("SELECT count(*)::int8 FROM event_ids WHERE occurred_at < '2026-02-01'")
        #expect(januaryIds == 7)
        let before = try await harness.count("SELECT count(*)::int8 FROM event_log WHERE occurred_at < '2026-04-01'")

        harness.clock.set(Self.at("2026-06-10T12:00:00Z"))
        try await harness.run(Self.configuration(harness, folder: folder)) { server in
            // Kept: the current month and the two before it, and April (its first day + 3 months has not passed).
            try await Waits.until("March dropped", timeout: .seconds(120)) {
                try await !Self.partitionExists(harness, "event_log_y2026m03")
            }
            #expect(try await Self.partitionExists(harness, "event_log_y2026m04"))
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE occurred_at < '2026-04-01'") == 0)
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE occurred_at >= '2026-04-01' AND install_id IS NOT NULL") == 3)
            // Each dropped month is a whole archive: its rows, a checksum sha256sum accepts.
            var archived = 0
            for month in ["2026_01", "2026_02", "2026_03"] {
                let file = "event_log_\(month).copy.gz"
                let rows = try String(contentsOf: folder.appendingPathComponent(file + ".rows"), encoding: .utf8)
                archived += Int(rows.trimmingCharacters(in: .whitespacesAndNewlines)) ?? -1
                #expect(try await Self.sha256sumAccepts(file + ".sha256", in: folder), "\(file)")
            }
            #expect(archived == before)
            // A dropped month's archive is not overwritten by an empty one.
            let again = try await BinaryTests.command(
                ["log", "export", "--month", "2026-02", "--directory", folder.path], databaseURL: harness.databaseURL)
            #expect(again.status != 0 && again.error.contains("dropped by retention"), "\(again.error)")
            #expect(try String(contentsOf: folder.appendingPathComponent("event_log_2026_02.copy.gz.rows"), encoding: .utf8) == "4\n")
            // The ids go with their events; April's stay, so a resend of one is still a duplicate.
            try await Waits.until("event ids pruned", timeout: .seconds(30)) {
                try await harness.count("SELECT count(*)::int8 FROM event_ids WHERE occurred_at < '2026-04-01'") == 0
            }
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_ids") == 3)

            // The reports keep January's figures (the projections had applied it), and say nothing of a shorter history.
            let january = try await server.send(
                .GET, "/v1/apps/expenses/reports/adoption?platform=ios&from=2026-01-15&to=2026-01-15", key: harness.readKey)
            #expect(january.status == 200)
            #expect(january.headers["Events-From"].isEmpty)
            var browser = DashboardTests.Browser(server: server)
            _ = try await browser.signIn(harness.readKey)
            let overview = "/dashboard/apps/expenses?platform=ios&days=180"
            #expect(try await !browser.get(overview).text.contains("id=\"events-from\""))
            #expect(try january.value()["days"]?.arrayValue?.first?["activeInstalls"]?.intValue == 6, "\(january.text)")
            // The catalog's history still holds January's policy.
            let history = try await server.send(.GET, "/v1/apps/expenses/history", key: harness.readKey)
            #expect(history.text.contains("policy_replaced"), "\(history.text)")

            // An export that resumes before the drop would skip events that are gone: 410, naming since.
            let gone = try await server.send(.GET, "/v1/apps/expenses/events/export?since=\(early)", key: harness.adminKey)
            #expect(gone.status == 410, "\(gone.text)")
            #expect(try gone.value()["field"] == .string("since"))
            let cli = try await BinaryTests.command(
                ["log", "export", "--app", "expenses", "--since", early], databaseURL: harness.databaseURL)
            #expect(cli.status != 0 && cli.error.contains("--since") && cli.error.contains("dropped by retention"), "\(cli.error)")
            let whole = try await server.send(.GET, "/v1/apps/expenses/events/export", key: harness.adminKey)
            #expect(whole.status == 200)
            #expect(whole.text.split(separator: "\n").count == 3, "\(whole.text)")

            // A rebuilt adoption reads the log from April, and takes over the days before it from the
            // generation it replaces: every figure stays, January's health included, with no Events-From.
            let adoption = "/v1/apps/expenses/reports/adoption?platform=ios&from=2026-01-01&to=2026-04-30"
            let releaseReport = "/v1/apps/expenses/reports/releases/2.0?platform=ios"
            let adoptionBefore = try await server.send(.GET, adoption, key: harness.readKey).value()
            let healthBefore = try await server.send(.GET, releaseReport, key: harness.readKey).value()["health"]
            #expect(healthBefore?["days"]?.arrayValue?.contains { $0["exited"]?.intValue == 1 } == true, "\(String(describing: healthBefore))")
            let generations = "SELECT max(generation)::int8 FROM projections WHERE name = 'adoption' AND state = 'active'"
            let replaced = try await harness.count(PostgresQuery(unsafeSQL: generations))
            let carried = try await BinaryTests.command(["projections", "rebuild", "adoption"], databaseURL: harness.databaseURL)
            #expect(carried.status == 0, "\(carried.error)")
            #expect(try await harness.count(PostgresQuery(unsafeSQL: generations)) > replaced)
            let adoptionAfter = try await server.send(.GET, adoption, key: harness.readKey)
            #expect(adoptionAfter.headers["Events-From"].isEmpty, "\(adoptionAfter.headers)")
            #expect(try adoptionAfter.value()["days"] == adoptionBefore["days"], "\(adoptionAfter.text)")
            let january15 = try adoptionAfter.value()["days"]?.arrayValue?.first { $0["day"] == "2026-01-15" }
            #expect(january15?["activeInstalls"]?.intValue == 6, "\(adoptionAfter.text)")
            #expect(try await server.send(.GET, releaseReport, key: harness.readKey).value()["health"] == healthBefore)
            #expect(try await !browser.get(overview).text.contains("id=\"events-from\""))

            // release_cohorts takes nothing over (a cohort's figures are not closed by a day): a rebuild would
            // count from April only, refused unless the operator accepts it.
            let refused = try await BinaryTests.command(["projections", "rebuild", "release_cohorts"], databaseURL: harness.databaseURL)
            #expect(refused.status != 0 && refused.error.contains("--accept-shorter-history"), "\(refused.error)")
            // Accepted, it reads the catalog events kept from January first, as the feed had them: the release
            // added then still has its report (its cohort counts from April's events).
            let cohorts = try await BinaryTests.command(
                ["projections", "rebuild", "release_cohorts", "--accept-shorter-history"], databaseURL: harness.databaseURL)
            #expect(cohorts.status == 0, "\(cohorts.error)")
            let release = try await server.send(.GET, releaseReport, key: harness.readKey)
            #expect(release.status == 200, "\(release.text)")
            // The dashboard's release page says from when it counts.
            let page = try await browser.get("/dashboard/apps/expenses/releases/2.0?platform=ios").text
            #expect(page.contains("Counted from events since <time datetime=\"2026-04-01T00:00:00.000Z\">2026-04-01 00:00 UTC</time>"), "\(page)")
            #expect(try release.value()["releasedAt"] == .string("2026-01-01T00:00:00.000Z"), "\(release.text)")
            #expect(release.headers["Events-From"].first == "2026-04-01T00:00:00.000Z", "\(release.headers)")
            // So does a set-based catch-up (a long log's rebuild), which reads the releases in one statement.
            let backfilled = try await harness.sql { client in
                var settings = ProjectionSettings()
                settings.backfillThreshold = 0
                let runner = ProjectionRunner(
                    store: ProjectionStore(client: client, logger: TestEnvironment.logger), settings: settings,
                    logger: TestEnvironment.logger)
                return try await runner.rebuild(try #require(Projections.named("release_cohorts")), acceptShorterHistory: true) { _ in }
            }
            #expect(backfilled.state == .active)
            let afterCatchUp = try await server.send(.GET, "/v1/apps/expenses/reports/releases/2.0?platform=ios", key: harness.readKey)
            #expect(afterCatchUp.status == 200 && afterCatchUp.text.contains("2026-01-01T00:00:00"), "\(afterCatchUp.text)")
        }
    }

    /// A month stays while a projection has not applied it, and while its archive cannot be written (the
    /// folder is missing); each is counted, and the next pass drops it once both hold.
    @Test func aMonthWaitsForAProjectionBehindAndForAFailedExport() async throws {
        let harness = try await Harness.make(now: Self.at("2026-06-10T12:00:00Z"))
        try await harness.sql { client in
            try await client.withConnection { connection in
                _ = try await connection.query("SELECT upshift_ensure_event_partitions('2026-02-01', '2026-02-01')", logger: TestEnvironment.logger)
                for hour in 0..<4 {
                    try await insertEvent(
                        on: connection, app: "expenses", install: UUID(), at: Self.at("2026-02-03T00:00:00Z").addingTimeInterval(Double(hour * 3_600)),
                        version: "1.0")
                }
            }
        }
        let root = try Self.folder()
        defer { try? FileManager.default.removeItem(at: root) }
        let folder = root.appendingPathComponent("archives")
        var configuration = Self.configuration(harness, folder: folder)
        // The adoption projection holds its first batch until the test lets it go.
        let held = Mutex(true)
        configuration.projections.beforeCommit = { name in
            while name == "adoption", held.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(50)) }
        }
        try await harness.run(configuration) { server in
            try await Waits.until("a pass waits for the projection", timeout: .seconds(120)) {
                (try await server.metric(#"upshift_retention_months_total{outcome="waiting"}"#) ?? 0) >= 1
            }
            #expect(try await Self.partitionExists(harness, "event_log_y2026m02"))
            held.withLock { $0 = false }
            try await Waits.until("a pass fails to archive", timeout: .seconds(120)) {
                (try await server.metric(#"upshift_retention_months_total{outcome="export_failed"}"#) ?? 0) >= 1
            }
            #expect(try await Self.partitionExists(harness, "event_log_y2026m02"))
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE occurred_at < '2026-03-01' AND install_id IS NOT NULL") == 4)
            #expect(try await harness.count("SELECT count(*)::int8 FROM log_retention") == 0)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            try await Waits.until("February dropped", timeout: .seconds(120)) {
                try await !Self.partitionExists(harness, "event_log_y2026m02")
            }
            #expect(try String(contentsOf: folder.appendingPathComponent("event_log_2026_02.copy.gz.rows"), encoding: .utf8) == "4\n")
            #expect((try await server.metric(#"upshift_retention_months_total{outcome="dropped"}"#) ?? 0) >= 1)
        }
    }

    /// A month stays while a generation that rebuilds from the start of the log has not passed it, though the
    /// active generations have: it is dropped once the rebuild has read it.
    @Test func aMonthWaitsForAGenerationThatRebuilds() async throws {
        let harness = try await Self.januaryWithOneEvent()
        try await harness.run { _ in try await harness.waitForProjections() }
        let building = try await harness.sql { client in
            try await ProjectionStore(client: client, logger: TestEnvironment.logger).beginRebuild(AdoptionProjection())
        }
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = Self.configuration(harness, folder: folder)
        // The rebuilding generation's batches roll back until the test lets them go; the active one has
        // nothing left to apply.
        let held = Mutex(true)
        configuration.projections.beforeCommit = { name in
            if name == "adoption", held.withLock({ $0 }) { throw HarnessError("held") }
        }
        try await harness.run(configuration) { server in
            try await Waits.until("a pass waits for the rebuild", timeout: .seconds(120)) {
                (try await server.metric(#"upshift_retention_months_total{outcome="waiting"}"#) ?? 0) >= 1
            }
            #expect(try await Self.partitionExists(harness, "event_log_y2026m01"))
            #expect(try await harness.count("SELECT count(*)::int8 FROM log_retention") == 0)
            held.withLock { $0 = false }
            try await Waits.until("January dropped", timeout: .seconds(120)) {
                try await !Self.partitionExists(harness, "event_log_y2026m01")
            }
            try await Waits.until("the rebuilt generation switched in", timeout: .seconds(120)) {
                try await harness.count(
                    "SELECT count(*)::int8 FROM projections WHERE name = 'adoption' AND generation = \(building.generation) AND state = 'active'") == 1
            }
        }
    }

    /// An install erased after its January was dropped: January's days keep their anonymous counts (the
    /// log no longer holds the events to take out), and June's lose exactly the install, as a log that never
    /// held it would give.
    @Test func anInstallErasedAfterItsFirstMonthWasDroppedLeavesThatMonthsCounts() async throws {
        let harness = try await Harness.make(now: Self.at("2026-01-05T12:00:00Z"))
        let (erased, kept) = (UUID(), UUID())
        @Sendable func launches(_ time: String) -> [[String: String]] {
            [erased, kept].map { clientEvent(occurredAt: Self.at(time), install: $0) }
        }
        try await harness.run { server in
            #expect(try await server.postEvents(launches("2026-01-05T10:00:00Z"), key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            harness.clock.set(Self.at("2026-06-08T12:00:00Z"))
            try await harness.sql { client in
                _ = try await client.query("SELECT upshift_ensure_event_partitions('2026-06-01', '2026-06-01')")
            }
            #expect(try await server.postEvents(launches("2026-06-08T10:00:00Z"), key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
        }
        harness.clock.set(Self.at("2026-06-10T12:00:00Z"))
        let folder = try Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        var configuration = Self.configuration(harness, folder: folder)
        configuration.projections.erasurePass = .milliseconds(200)
        try await harness.run(configuration) { server in
            func actives(_ day: String) async throws -> Int? {
                let reply = try await server.send(
                    .GET, "/v1/apps/expenses/reports/adoption?platform=ios&from=\(day)&to=\(day)", key: harness.readKey)
                #expect(reply.status == 200, "\(reply.text)")
                return try reply.decode(AdoptionBody.self).days.first?.activeInstalls
            }
            try await Waits.until("January dropped", timeout: .seconds(120)) {
                try await !Self.partitionExists(harness, "event_log_y2026m01")
            }
            try await harness.waitForProjections()
            #expect(try await actives("2026-01-05") == 2)
            #expect(try await actives("2026-06-08") == 2)
            let requested = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(erased)", key: harness.adminKey)
            #expect(requested.status == 202)
            let done = try await ErasureTests.waitUntilDone(
                try #require(try requested.json()["id"] as? String), server: server, harness: harness, install: erased.uuidString)
            #expect(done["events"] as? Int == 1, "only June's event was still in the log")
            try await harness.waitForProjections()
            #expect(try await actives("2026-01-05") == 2)
            #expect(try await actives("2026-06-08") == 1)
        }
    }

    /// `serve` refuses a retention shorter than two months, naming the variable, before it touches anything.
    @Test func serveRefusesARetentionBelowTwoMonths() async throws {
        let harness = try await Harness.make()
        let refused = try await BinaryTests.command(
            ["serve"], databaseURL: harness.databaseURL, environment: ["UPSHIFT_RETENTION_MONTHS": "1", "UPSHIFT_EXPORT_DIR": "/tmp"])
        #expect(refused.status != 0)
        #expect(refused.error.contains("UPSHIFT_RETENTION_MONTHS") && refused.error.contains("at least 2"), "\(refused.error)")
    }

    /// A `DETACH … CONCURRENTLY` cut short (cancelled while it waited for a reader: the partition stays
    /// "detach pending") is finished with `FINALIZE` and dropped by the next pass.
    @Test func aDetachCutShortIsFinishedAndDropped() async throws {
        let harness = try await Self.januaryWithOneEvent()
        try await harness.sql { client in
            try await client.withConnection { reader in
                // A reader's open transaction makes the detach wait; cancelling it then leaves it pending.
                try await reader.query("BEGIN", logger: TestEnvironment.logger)
                try await reader.query("SELECT count(*) FROM event_log_y2026m01", logger: TestEnvironment.logger)
                try await withThrowingTaskGroup(of: Void.self) { tasks in
                    tasks.addTask {
                        try await client.withConnection { detacher in
                            _ = try? await detacher.query(
                                "ALTER TABLE event_log DETACH PARTITION event_log_y2026m01 CONCURRENTLY", logger: TestEnvironment.logger)
                        }
                    }
                    try await Waits.until("the detach waits for the reader", timeout: .seconds(60)) {
                        try await harness.count(
                            "SELECT count(*)::int8 FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE event_log DETACH%' AND wait_event_type = 'Lock'"
                        ) == 1
                    }
                    _ = try await harness.count(
                        "SELECT count(pg_cancel_backend(pid))::int8 FROM pg_stat_activity WHERE query LIKE 'ALTER TABLE event_log DETACH%'")
                    try await tasks.waitForAll()
                }
                try await reader.query("COMMIT", logger: TestEnvironment.logger)
            }
        }
        #expect(
            try await harness.count(
                "SELECT count(*)::int8 FROM pg_inherits WHERE inhrelid = 'event_log_y2026m01'::regclass AND inhdetachpending") == 1)
        try await Self.serveUntilJanuaryIsDropped(harness)
    }

    /// A month's table detached but not dropped (the instance died in between: it was archived and checked
    /// before it was detached) is dropped by the next pass.
    @Test func aTableDetachedButNotDroppedIsDroppedNext() async throws {
        let harness = try await Self.januaryWithOneEvent()
        // A detached table the worker did not drop yet (its process died in between).
        try await harness.sql { client in
            _ = try await client.query("ALTER TABLE event_log DETACH PARTITION event_log_y2026m01")
        }
        try await Self.serveUntilJanuaryIsDropped(harness)
    }
}
