import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// Reports from a streaming replica (`UPSHIFT_REPORTS_DATABASE_URL`): the report queries read the
/// replica and say how fresh they are (`dataAsOf`, read where the report was read), everything else
/// stays on the primary, and a replica that cannot be reached fails the reports alone.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct ReplicaReportsTests {
    @Test func theVariableIsReadLikeDatabaseURLAndItsErrorsNameIt() throws {
        let primary = "postgres://postgres@127.0.0.1:5432/upshift"
        let unset = try AppConfiguration.fromEnvironment(["DATABASE_URL": primary])
        #expect(unset.reportsDatabase == nil)
        #expect(try AppConfiguration.fromEnvironment(["DATABASE_URL": primary, "UPSHIFT_REPORTS_DATABASE_URL": ""]).reportsDatabase == nil)

        let set = try AppConfiguration.fromEnvironment([
            "DATABASE_URL": primary,
            "UPSHIFT_REPORTS_DATABASE_URL": "postgresql://reader:s%40cret@replica.internal:6432/upshift?sslmode=require",
        ])
        #expect(
            set.reportsDatabase
                == DatabaseSettings(
                    host: "replica.internal", port: 6432, username: "reader", password: "s@cret", database: "upshift",
                    tlsMode: "require"))
        #expect(set.database.host == "127.0.0.1")
        // libpq's connect_timeout, in whole seconds: how long a new connection may take (5 s without it).
        #expect(set.database.connectTimeout == nil && set.database.sessionTimeout == .seconds(5))
        let patient = try AppConfiguration.fromEnvironment(["DATABASE_URL": primary + "?sslmode=disable&connect_timeout=30"])
        #expect(patient.database.connectTimeout == .seconds(30) && patient.database.sessionTimeout == .seconds(30))

        for bad in [
            "mysql://reader:hunter2@replica/upshift", "postgres://reader:hunter2@/upshift",
            "postgres://reader:hunter2@replica:70000/upshift", "postgres://reader:hunter2@replica/upshift?sslmode=verify-full",
            "postgres://reader:hunter2@replica/upshift?connect_timeout=0", "postgres://reader:hunter2@replica/upshift?connect_timeout=601",
            "postgres://reader:hunter2@replica/upshift?connect_timeout=2.5", "postgres://reader:hunter2@replica/upshift?connect_timeout=",
            "replica.internal",
        ] {
            do {
                _ = try AppConfiguration.fromEnvironment(["DATABASE_URL": primary, "UPSHIFT_REPORTS_DATABASE_URL": bad])
                Issue.record("\(bad) was accepted")
            } catch {
                let message = String(describing: error)
                #expect(message.hasPrefix("UPSHIFT_REPORTS_DATABASE_URL "), "\(bad): \(message)")
                #expect(!message.contains("hunter2"), "the password is repeated: \(message)")
            }
        }
    }

    @Test(.timeLimit(.minutes(10)))
    func reportsReadTheReplicaAndSayHowFreshTheyAre() async throws {
        let started = ContinuousClock.now
        // Missing binaries fail the test (scripts/test installs them), never skip it.
        let binaries = try #require(
            PostgresCluster.binaryFolder,
            "PostgreSQL server binaries (initdb, pg_ctl, postgres, pg_basebackup) not found: install postgresql")
        let folder = try PostgresCluster.makeFolder(prefix: "upshift-replica")
        let primary = PostgresCluster(
            folder: folder.appendingPathComponent("primary"), port: try await freePort(), binaries: binaries)
        let replica = PostgresCluster(
            folder: folder.appendingPathComponent("replica"), port: try await freePort(), binaries: binaries)
        let outcome: Result<Duration, any Error>
        do {
            outcome = .success(try await Self.run(primary: primary, replica: replica))
        } catch {
            outcome = .failure(error)
        }
        for cluster in [replica, primary] where await cluster.isRunning() {
            try? await cluster.stop(mode: "immediate")
        }
        PostgresCluster.removeFolder(folder)
        let seconds = Double((ContinuousClock.now - started).components.seconds)
        let replay = (try? outcome.get()).map { duration in
            let milliseconds = duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
            return "; the new figures were read \(milliseconds) ms after replay resumed"
        } ?? ""
        FileHandle.standardError.write(Data("ReplicaReportsTests: the replica phase took \(Int(seconds)) s\(replay)\n".utf8))
        if case .failure(let error) = outcome {
            Issue.record("primary log:\n\(primary.logTail())\nreplica log:\n\(replica.logTail())")
            throw error
        }
    }

    /// The whole scenario on a started primary and replica; returns how long the replica took to apply
    /// what it had received while paused.
    static func run(primary: PostgresCluster, replica: PostgresCluster) async throws -> Duration {
        try await primary.initialize()
        try await primary.start()
        try await replica.copy(asReplicaOf: primary)
        try await replica.start()
        let primaryDatabase = primary.settings(), replicaDatabase = replica.settings()
        #expect(try await text(replica.settings(database: "postgres"), "SELECT pg_is_in_recovery()::text") == "true")

        // The database, its migrations, the app and its keys: written on the primary, streamed.
        let start = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        try await execute(primary.settings(database: "postgres"), "CREATE DATABASE upshift")
        let harness = try await harness(on: primaryDatabase, now: start)
        var configuration = harness.configuration()
        configuration.reportsDatabase = replicaDatabase
        configuration.pools.waitTimeout = .seconds(1)
        let day = String(Timestamp.format(start).prefix(10))
        let report = "/v1/apps/expenses/reports/adoption?platform=ios&from=\(day)&to=\(day)"

        return try await harness.run(configuration) { server in
            // 1. Five installs on 1.0.0, projected on the primary and replayed on the replica.
            let first = (0..<5).map { _ in clientEvent(occurredAt: start, version: "1.0.0") }
            #expect(try await server.postEvents(first, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            try await waitForReplay(primaryDatabase, replicaDatabase, applied: true)
            var answer = try await adoption(server, report, key: harness.readKey)
            #expect(answer.status == 200 && answer.installs == 5, "\(answer)")
            #expect(answer.dataAsOf == Timestamp.format(start) && answer.header == Timestamp.format(start), "\(answer)")
            // The reports pool reads the replica; every other pool the primary.
            #expect(try await sessions(replicaDatabase, "application_name = 'upshift-reports'") >= 1)
            let others = "application_name IN ('upshift-hot', 'upshift-reads', 'upshift-projections')"
            #expect(try await sessions(replicaDatabase, others) == 0)
            #expect(try await sessions(primaryDatabase, "application_name = 'upshift-reports'") == 0)

            // 2. Replay paused: three installs on 1.1.0 and a policy change reach the primary (and the
            // replica receives their WAL), but the replica applies none of it.
            try await execute(replicaDatabase, "SELECT pg_wal_replay_pause()")
            #expect(try await text(replicaDatabase, "SELECT pg_get_wal_replay_pause_state()") != "not paused")
            let later = start.addingTimeInterval(90)
            harness.clock.set(later)
            let second = (0..<3).map { _ in clientEvent(occurredAt: start, version: "1.1.0") }
            #expect(try await server.postEvents(second, key: harness.ingestKey).status == 200)
            // A write, then reads of what it wrote: the catalog is read on the primary, so the page
            // and the ETag are current while the replica stands still.
            let policy = "/v1/apps/expenses/policies/ios"
            let written = try await server.send(
                .PUT, policy, key: harness.adminKey, json: .object(["enabled": .bool(true), "minimumVersion": .string("1.0")]),
                headers: [("If-Match", "\"0\"")])
            #expect(written.status == 200 && written.etag == "\"1\"")
            let reread = try await server.send(.GET, policy, key: harness.adminKey)
            #expect(reread.status == 200 && reread.etag == "\"1\"")
            let again = try await server.send(
                .PUT, policy, key: harness.adminKey, json: .object(["enabled": .bool(true), "minimumVersion": .string("1.0.1")]),
                headers: [("If-Match", reread.etag ?? "")])
            #expect(again.status == 200 && again.etag == "\"2\"")
            try await harness.waitForProjections()
            #expect(try await dataAsOf(primaryDatabase, "adoption") == Timestamp.format(later))
            try await waitForReplay(primaryDatabase, replicaDatabase, applied: false)

            answer = try await adoption(server, report, key: harness.readKey)
            #expect(answer.status == 200 && answer.installs == 5, "the paused replica's figures: \(answer)")
            #expect(answer.dataAsOf == Timestamp.format(start) && answer.header == Timestamp.format(start), "\(answer)")
            let csv = try await server.send(.GET, report, key: harness.readKey, headers: [("Accept", "text/csv")])
            #expect(csv.status == 200 && csv.headers["Data-As-Of"].first == Timestamp.format(start))
            #expect(csv.text == "day,active_installs,version,installs\r\n\(day),5,1.0.0,5\r\n", "\(csv.text)")
            var browser = DashboardTests.Browser(server: server)
            #expect(try await browser.signIn(harness.readKey).status == 303)
            let overview = "/dashboard/apps/expenses?platform=ios&days=7"
            let page = try await browser.get(overview)
            #expect(page.status == 200 && page.text.contains("datetime=\"\(Timestamp.format(start))\""), "\(page.text.prefix(600))")
            // The other reports say it too.
            let impact = try await server.send(
                .GET, "/v1/apps/expenses/reports/minimum-impact?platform=ios&version=1.1", key: harness.readKey)
            #expect(try impact.value()["dataAsOf"]?.stringValue == Timestamp.format(start))
            #expect(try impact.value()["activeInstalls"]?.intValue == 5)
            let prompts = try await server.send(.GET, "/v1/apps/expenses/reports/prompts?platform=ios", key: harness.readKey)
            #expect(try prompts.value()["dataAsOf"]?.stringValue == Timestamp.format(start))

            // 3. Replay resumed: the new figures with the new dataAsOf.
            try await execute(replicaDatabase, "SELECT pg_wal_replay_resume()")
            let resumed = ContinuousClock.now
            while true {
                answer = try await adoption(server, report, key: harness.readKey)
                if answer.installs == 8 { break }
                guard ContinuousClock.now - resumed < .seconds(30) else {
                    Issue.record("the replica did not show the new figures within 30 s: \(answer)")
                    break
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let replay = ContinuousClock.now - resumed
            #expect(answer.dataAsOf == Timestamp.format(later) && answer.header == Timestamp.format(later), "\(answer)")
            #expect(try await browser.get(overview).text.contains("datetime=\"\(Timestamp.format(later))\""))

            // 4. The replica stopped: reports answer 503 with Retry-After within their bounds, counted;
            // events, the check, the admin API and the dashboard's rollout controls go on.
            try await replica.stop(mode: "immediate")
            for attempt in 1...2 {
                let asked = ContinuousClock.now
                let refused = try await server.send(.GET, report, key: harness.readKey)
                let waited = ContinuousClock.now - asked
                #expect(refused.status == 503 && refused.headers["Retry-After"].first != nil, "attempt \(attempt): \(refused.text)")
                #expect(waited < .seconds(10), "attempt \(attempt) took \(waited)")
            }
            let refusedCSV = try await server.send(.GET, report, key: harness.readKey, headers: [("Accept", "text/csv")])
            #expect(refusedCSV.status == 503 && refusedCSV.headers["Retry-After"].first != nil)
            let unavailable = try await metrics(server).filter { $0.name.hasPrefix(#"upshift_db_pool_unavailable_total{pool="reports","#) }
            #expect(unavailable.reduce(0) { $0 + $1.value } >= 3, "\(unavailable)")

            let events = [clientEvent(occurredAt: later, version: "1.1.0")]
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            #expect(try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0").status == 200)
            #expect(try await server.send(.GET, "/v1/apps/expenses", key: harness.adminKey).status == 200)
            #expect(try await server.send(.GET, policy, key: harness.adminKey).etag == "\"2\"")
            #expect(try await server.send(.GET, "/v1/apps/expenses/history", key: harness.adminKey).status == 200)
            #expect(try await server.request(.GET, "/health/db").status == 200)
            let degraded = try await browser.get(overview)
            #expect(degraded.status == 200 && degraded.text.contains("The reports cannot be read right now"), "\(degraded.status)")
            #expect(degraded.text.contains("minimum version") || degraded.text.contains("Minimum version"))
            return replay
        }
    }

    // MARK: Helpers

    /// What the adoption report answered: status, the day's active installs, `dataAsOf` and `Data-As-Of`.
    struct Adoption: CustomStringConvertible {
        var status: Int
        var installs: Int?
        var dataAsOf: String?
        var header: String?
        var description: String {
            "HTTP \(status), \(installs.map(String.init) ?? "–") installs, dataAsOf \(dataAsOf ?? "null"), "
                + "header \(header ?? "none")"
        }
    }

    static func adoption(_ server: Server, _ path: String, key: String) async throws -> Adoption {
        let reply = try await server.send(.GET, path, key: key)
        let json = reply.status == 200 ? try reply.json() : [:]
        let day = (json["days"] as? [[String: Any]])?.first
        return Adoption(
            status: reply.status, installs: day?["activeInstalls"] as? Int, dataAsOf: json["dataAsOf"] as? String,
            header: reply.headers["Data-As-Of"].first)
    }

    /// The app `expenses` with a key of each kind, on a migrated database (what `Harness.make` makes on
    /// a clone of the shared cluster).
    static func harness(on database: DatabaseSettings, now: Date) async throws -> Harness {
        let keys = try await withPostgres(database) { client in
            let logger = TestEnvironment.logger
            _ = try await Migrator(client: client, logger: logger).migrate(
                try Migration.load(from: TestEnvironment.migrationsDirectory))
            _ = try await CatalogStore(client: client, logger: logger).createApp(
                AppInfo(id: "expenses", name: "Expenses"), actor: "tests", reason: nil, now: now)
            let store = KeyStore(client: client, logger: logger)
            let ingest = try await store.create(name: "ios-app", scope: .ingest, appId: "expenses", now: now).1
            let read = try await store.create(name: "reports", scope: .read, appId: nil, now: now).1
            let admin = try await store.create(name: "owner", scope: .admin, appId: "expenses", now: now).1
            let root = try await store.create(name: "root", scope: .admin, appId: nil, now: now).1
            return (ingest, read, admin, root)
        }
        return Harness(
            database: database, clock: ManualClock(now), app: "expenses", ingestKey: keys.0, readKey: keys.1,
            adminKey: keys.2, rootKey: keys.3)
    }

    /// Waits until the replica has applied (or, with `applied: false`, at least received) all the WAL
    /// the primary has written so far.
    static func waitForReplay(_ primary: DatabaseSettings, _ replica: DatabaseSettings, applied: Bool) async throws {
        let written = try #require(try await text(primary, "SELECT pg_current_wal_lsn()::text"))
        let position = applied ? "pg_last_wal_replay_lsn()" : "pg_last_wal_receive_lsn()"
        try await Waits.until("the replica \(applied ? "applying" : "receiving") WAL up to \(written)", timeout: .seconds(30)) {
            try await text(replica, PostgresQuery(unsafeSQL: "SELECT (\(position) >= '\(written)'::pg_lsn)::text")) == "true"
        }
    }

    /// Sessions of the database matching `condition`.
    static func sessions(_ database: DatabaseSettings, _ condition: String) async throws -> Int {
        let count = try await text(
            database,
            PostgresQuery(
                unsafeSQL: "SELECT count(*)::text FROM pg_stat_activity WHERE datname = current_database() AND \(condition)"))
        return count.flatMap { Int($0) } ?? -1
    }

    /// The first column of the first row, as text (nil: no row, or NULL).
    static func text(_ database: DatabaseSettings, _ query: PostgresQuery) async throws -> String? {
        try await withPostgres(database, maximumConnections: 1) { client in
            for try await value in try await client.query(query).decode(String?.self) { return value }
            return nil
        }
    }

    static func execute(_ database: DatabaseSettings, _ query: PostgresQuery) async throws {
        try await withPostgres(database, maximumConnections: 1) { client in _ = try await client.query(query) }
    }

    /// The `max_recorded_at` of a projection's active generation, written as `dataAsOf` is.
    static func dataAsOf(_ database: DatabaseSettings, _ projection: String) async throws -> String? {
        try await text(
            database,
            """
            SELECT to_char(max_recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')
            FROM projections WHERE name = \(projection) AND state = 'active'
            """)
    }

    /// The samples of `/metrics`: the whole name with its labels, and the value.
    static func metrics(_ server: Server) async throws -> [(name: String, value: Double)] {
        let text = try await server.request(.GET, "/metrics").text
        return text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...])
            else { return nil }
            return (String(line[..<space]), value)
        }
    }
}
