import AsyncHTTPClient
import Foundation
import PostgresNIO
import Testing
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// The pools of the hot path, the reads and the projections are apart, and every database call of a
/// request has a bound: slow or stuck reports cannot starve ingestion or the check, and what cannot be
/// answered in time is a `503` with `Retry-After`, never a `500` or an unbounded wait.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct HotPathTests {
    /// A report whose read-model table another session holds locked waits, on a connection of the
    /// reads pool, until the lock goes.
    static func lockingAdoption<T: Sendable>(
        _ harness: Harness, _ body: @escaping @Sendable () async throws -> T
    ) async throws -> T {
        try await withPostgres(harness.database, maximumConnections: 1) { client in
            try await DatabasePool(client: client, logger: TestEnvironment.logger).withConnection { connection in
                var generation = 0
                for try await value in try await connection.query(
                    "SELECT generation FROM projections WHERE name = 'adoption' AND state = 'active'", logger: TestEnvironment.logger
                ).decode(Int.self) { generation = value }
                let table = ProjectionTables.name("adoption_daily", generation: generation)
                try await connection.query("BEGIN", logger: TestEnvironment.logger)
                let lock: SQL = "LOCK TABLE \(table) IN ACCESS EXCLUSIVE MODE"
                try await connection.query(lock, logger: TestEnvironment.logger)
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

    /// Sessions of the reads pool waiting for a lock.
    static func blockedReads(_ harness: Harness) async throws -> Int {
        try await harness.count(
            """
            SELECT count(*)::int8 FROM pg_stat_activity
            WHERE application_name = 'upshift-reads' AND wait_event_type = 'Lock' AND datname = current_database()
            """)
    }

    static let adoption = "/v1/apps/expenses/reports/adoption?platform=ios"

    @Test func reportsHoldingEveryReadConnectionStarveNeitherIngestionNorTheCheck() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.pools.readConnections = 2
        configuration.pools.waitTimeout = .seconds(1)
        let now = harness.clock.now()
        try await harness.run(configuration) { server in
            try await harness.waitForProjections()
            try await Self.lockingAdoption(harness) {
                // Two reports take both read connections and wait for the lock.
                let stuck = (0..<2).map { _ in
                    Task { try await server.send(.GET, Self.adoption, key: harness.readKey).status }
                }
                try await Waits.until("two reports waiting on the lock", timeout: .seconds(20)) {
                    try await Self.blockedReads(harness) >= 2
                }

                // The hot path has connections of its own.
                let events = try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey)
                #expect(events.status == 200)
                let check = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0")
                #expect(check.status == 200)

                // A further report finds no read connection free: 503 once its wait is over.
                let started = ContinuousClock.now
                let refused = try await server.send(.GET, Self.adoption, key: harness.readKey)
                let waited = ContinuousClock.now - started
                #expect(refused.status == 503)
                #expect(refused.headers["Retry-After"].first.flatMap(Int.init) != nil)
                #expect(refused.headers["Content-Type"].first == "application/problem+json")
                #expect(waited >= .milliseconds(900) && waited < .seconds(5), "503 after \(waited)")
                print("HotPathTests: a report with every read connection busy was answered 503 after \(waited)")
                // So does an admin read, on the same pool.
                #expect(try await server.send(.GET, "/v1/apps/expenses/releases", key: harness.adminKey).status == 503)
                #expect(
                    try await server.metric(#"upshift_db_pool_unavailable_total{pool="reads",reason="busy"}"#) ?? 0 >= 2)
                for task in stuck { task.cancel() }
            }
            // The lock gone, reports answer again.
            #expect(try await server.send(.GET, Self.adoption, key: harness.readKey).status == 200)
        }
    }

    @Test func aReportLongerThanTheStatementTimeoutIs503() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.pools.reportStatementTimeout = .seconds(1)
        try await harness.run(configuration) { server in
            try await harness.waitForProjections()
            try await Self.lockingAdoption(harness) {
                let started = ContinuousClock.now
                let reply = try await server.send(.GET, Self.adoption, key: harness.readKey)
                let waited = ContinuousClock.now - started
                #expect(reply.status == 503)
                #expect(reply.headers["Retry-After"].first.flatMap(Int.init) != nil)
                #expect(waited >= .milliseconds(900) && waited < .seconds(5), "503 after \(waited)")
                #expect(
                    try await server.metric(#"upshift_db_pool_unavailable_total{pool="reads",reason="statement_timeout"}"#)
                        == 1)
            }
        }
    }

    /// A write of the hot pool that waits for a lock past `UPSHIFT_DATABASE_TIMEOUT` is answered `503`,
    /// and PostgreSQL ends the statement too (the pool's own `statement_timeout`): no session of the hot
    /// pool is left waiting for the lock once its caller stopped waiting.
    @Test func aHotStatementThatOutwaitsItsBoundEndsInPostgreSQLToo() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.pools.answerTimeout = .seconds(2)
        configuration.ingestion.flushTimeout = .seconds(1)
        try await harness.run(configuration) { server in
            try await withPostgres(harness.database, maximumConnections: 1) { client in
                try await client.withConnection { connection in
                    try await connection.query("BEGIN", logger: TestEnvironment.logger)
                    try await connection.query("LOCK TABLE event_ids IN ACCESS EXCLUSIVE MODE", logger: TestEnvironment.logger)
                    let reply = try await server.postEvents([clientEvent(occurredAt: harness.clock.now())], key: harness.ingestKey)
                    #expect(reply.status == 503)
                    // The statement's bound (2 s) has passed, the lock is still held: nothing of the hot pool waits.
                    try await Task.sleep(for: .seconds(3))
                    let waiting = try await harness.count(
                        "SELECT count(*)::int FROM pg_stat_activity WHERE application_name = 'upshift-hot' AND wait_event_type = 'Lock'")
                    try await connection.query("ROLLBACK", logger: TestEnvironment.logger)
                    #expect(waiting == 0, "\(waiting) hot sessions still wait for the lock")
                }
            }
        }
    }

    /// PostgreSQL accepts connections but answers nothing (a partition), then refuses them: requests
    /// that need it are 503 within their bounds, the check answers from its snapshot.
    @Test func aDatabaseThatDoesNotAnswerIs503WithinTheBounds() async throws {
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var configuration = harness.configuration()
        configuration.database.port = proxy.port
        configuration.pools.waitTimeout = .seconds(1)
        configuration.pools.answerTimeout = .seconds(2)
        configuration.pools.reportStatementTimeout = .seconds(1)
        try await harness.run(configuration) { server in
            try await harness.waitForProjections()
            #expect(try await server.send(.GET, Self.adoption, key: harness.readKey).status == 200)
            for fault in ["stalled", "cut"] {
                if fault == "stalled" { proxy.stall() } else { await proxy.cut() }
                for (path, key) in [
                    (Self.adoption, harness.readKey), ("/v1/apps/expenses/releases", harness.adminKey),
                    ("/v1/apps/expenses/history", harness.adminKey),
                ] {
                    let started = ContinuousClock.now
                    let reply = try await server.send(.GET, path, key: key)
                    let waited = ContinuousClock.now - started
                    #expect(reply.status == 503, "\(fault): \(path)")
                    #expect(reply.headers["Retry-After"].first.flatMap(Int.init) != nil, "\(fault): \(path)")
                    #expect(waited < .seconds(6), "\(fault): \(path) answered after \(waited)")
                }
                let check = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0")
                #expect(check.status == 200, "\(fault)")
                proxy.restore()
            }
        }
        await proxy.stop()
    }

    @Test func healthOfTheDatabaseIsAskedAtMostAboutOnceASecond() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let leases = #"upshift_db_pool_wait_seconds_count{pool="hot"}"#
            let before = try await server.metric(leases) ?? 0
            let started = ContinuousClock.now
            // 50 asked at once: they share probes, at most one a second.
            try await withThrowingTaskGroup(of: Int.self) { group in
                for _ in 0..<50 { group.addTask { try await server.request(.GET, "/health/db").status } }
                for try await status in group { #expect(status == 200) }
            }
            let seconds = (ContinuousClock.now - started).components.seconds + 1
            let after = try await server.metric(leases) ?? 0
            // Besides the probes, the catalog poll and the key refresh lease once a second each.
            #expect(
                after - before <= Double(3 * seconds + 2),
                "\(after - before) leases of the hot pool for 50 health answers in about \(seconds) s")
        }
    }
}
