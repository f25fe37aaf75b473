import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// The readers' fair shares at their defaults (docs/OPERATIONS.md, "Limits"): one token runs 2 reads
/// at a time and 10 a second (bursts of 30), and 1 backtest; the instance runs 1 backtest with 4 more
/// waiting. Past the token's share: `429` with `Retry-After`, and another token reads on. Past the
/// instance's queue: `503` with `Retry-After`.
@Suite(.serverTimeLimit) struct ReaderSharesTests {
    static let adoption = "/v1/apps/expenses/reports/adoption?platform=ios"

    @Test func theDefaultsAreTwoReadsTenASecondAndOneBacktestPerTokenOneBacktestPerInstance() throws {
        let readers = try AppConfiguration.fromEnvironment(["DATABASE_URL": "postgres://postgres@127.0.0.1:5432/upshift"]).readers
        #expect(readers.concurrencyPerToken == 2 && readers.backtestsPerToken == 1)
        #expect(readers.ratePerToken == RateLimit(rate: 10, burst: 30))
        #expect(readers.backtestConcurrency == 1 && readers.backtestQueue == 4 && readers.backtestWait == .seconds(10))
    }

    @Test func aTokenPastItsShareIs429AndAnotherTokenReadsOn() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.readers = ReaderSettings()
        try await harness.run(configuration) { server in
            try await harness.waitForProjections()
            var browser = DashboardTests.Browser(server: server)
            #expect(try await browser.signIn(harness.readKey).status == 303)
            // Two reports of the read token wait for a lock the test holds: its third read is refused at once,
            // and so is a dashboard page of a session signed in with it.
            do {
                let lock = try await Self.lock(harness, projection: "adoption", table: "adoption_daily")
                async let first = server.send(.GET, Self.adoption, key: harness.readKey)
                async let second = server.send(.GET, Self.adoption, key: harness.readKey)
                try await Self.waitForLockWaits(harness, count: 2)
                let third = try await server.send(.GET, "/v1/apps/expenses", key: harness.readKey)
                #expect(third.status == 429)
                #expect(third.headers["Retry-After"].first == "1")
                #expect(third.text.contains("at most 2 reads at a time per token"))
                let page = try await browser.get("/dashboard/apps/expenses")
                #expect(page.status == 429 && page.headers["Retry-After"].first == "1", "\(page.status)")
                // Another token is not held back by the first one's share.
                #expect(try await server.send(.GET, "/v1/apps/expenses", key: harness.adminKey).status == 200)
                try await lock.close()
                #expect(try await [first.status, second.status] == [200, 200])
            }
            #expect(try await server.metric(#"upshift_reader_refused_total{reason="concurrency"}"#) == 2)
        }
    }

    /// The rate is the token's own: past its burst (5 here, and a rate too slow to refill during the test,
    /// so that a loaded machine cannot make it pass), `429` with `Retry-After`; another token reads on.
    @Test func aTokenPastItsRateIs429AndAnotherTokenReadsOn() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.readers = ReaderSettings()
        configuration.readers.ratePerToken = RateLimit(rate: 0.01, burst: 5)
        try await harness.run(configuration) { server in
            var statuses: [Int] = []
            for _ in 0..<7 { statuses.append(try await server.send(.GET, "/v1/apps/expenses", key: harness.rootKey).status) }
            #expect(statuses == [200, 200, 200, 200, 200, 429, 429], "\(statuses)")
            let refused = try await server.send(.GET, "/v1/apps/expenses", key: harness.rootKey)
            #expect(refused.status == 429 && Int(refused.headers["Retry-After"].first ?? "") ?? 0 >= 1)
            #expect(refused.text.contains("reads per second per token"))
            #expect(try await server.send(.GET, "/v1/apps/expenses", key: harness.adminKey).status == 200)
            #expect(try await server.metric(#"upshift_rate_limited_total{limit="reader"}"#) == 3)
        }
    }

    @Test func theInstanceRunsOneBacktestQueuesFourAndRefusesTheRest() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        configuration.readers = ReaderSettings()
        configuration.readers.backtestWait = .seconds(2)
        let tokens = try await harness.sql { client in
            var tokens: [String] = []
            for index in 0..<6 {
                tokens.append(
                    try await KeyStore(client: client, logger: TestEnvironment.logger)
                        .create(name: "reader-\(index)", scope: .read, appId: nil, now: harness.clock.now()).1)
            }
            return tokens
        }
        try await harness.run(configuration) { server in
            try await harness.waitForProjections()
            let preview = "/v1/apps/expenses/preview?platform=ios"
            do {
                let lock = try await Self.lock(harness, projection: "install_state", table: "install_state")
                // The first runs (and waits for the lock), four queue behind it, the sixth is refused at once.
                async let running = server.send(.POST, preview, key: tokens[0], json: .object([:]))
                try await Self.waitForLockWaits(harness, count: 1)
                let started = ContinuousClock.now
                let queued = try await withThrowingTaskGroup(of: (Int, Int, String?).self) { group in
                    for index in 1...5 {
                        group.addTask {
                            if index == 5 { try await Task.sleep(for: .milliseconds(300)) }  // after the four
                            let reply = try await server.send(.POST, preview, key: tokens[index], json: .object([:]))
                            return (index, reply.status, reply.headers["Retry-After"].first)
                        }
                    }
                    var replies: [(Int, Int, String?)] = []
                    for try await reply in group { replies.append(reply) }
                    return replies.sorted { $0.0 < $1.0 }
                }
                let waited = ContinuousClock.now - started
                #expect(queued.allSatisfy { $0.1 == 503 && $0.2 == "2" }, "\(queued)")
                #expect(waited >= .seconds(2) && waited < .seconds(10), "the queue waited \(waited)")
                try await lock.close()
                #expect(try await running.status == 200)
            }
            #expect(try await server.metric(#"upshift_reader_refused_total{reason="backtest_queue"}"#) == 5)
            // The slot is free again.
            #expect(try await server.send(.POST, preview, key: tokens[5], json: .object([:])).status == 200)
        }
    }

    /// Takes `ACCESS EXCLUSIVE` on a table of the active generation of `projection`, on a connection of
    /// its own: the statements that read the table wait until the connection closes.
    static func lock(_ harness: Harness, projection: String, table: String) async throws -> StoreConnection {
        let logger = TestEnvironment.logger
        let connection = try await Database.connect(harness.database, applicationName: "tests-lock", within: .seconds(10), logger: logger)
        var generation = 0
        for try await value in try await connection.query(
            "SELECT generation FROM projections WHERE name = \(projection) AND state = 'active'", logger: logger
        ).decode(Int.self) { generation = value }
        try await connection.query("BEGIN", logger: logger)
        let lock: SQL = "LOCK TABLE \(ProjectionTables.name(table, generation: generation)) IN ACCESS EXCLUSIVE MODE"
        try await connection.query(lock, logger: logger)
        return connection
    }

    static func waitForLockWaits(_ harness: Harness, count: Int) async throws {
        try await Waits.until("\(count) statements waiting for the lock", timeout: .seconds(10), every: .milliseconds(20)) {
            try await harness.count(
                "SELECT count(*)::int FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()") >= count
        }
    }
}
