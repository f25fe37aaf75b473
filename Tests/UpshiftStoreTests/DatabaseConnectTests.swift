import Foundation
import PostgresNIO
import Testing
import UpshiftTestSupport

@testable import UpshiftStore

@Suite struct DatabaseConnectTests {
    /// A connection that opens after its caller stopped waiting is closed, not dropped (PostgresNIO stops
    /// a debug build that lets an open connection go: the test suite once crashed so, a connection for an
    /// advisory lock opening just as its caller gave up). Whichever of the two comes second
    /// sees the other.
    @Test func aValueMadeAfterItsCallerGaveUpGoesBackToItsMaker() {
        let late = Handoff<Int>()
        #expect(late.abandon() == nil)
        #expect(!late.offer(1), "offered after the caller gave up: the maker cleans it up")
        let early = Handoff<Int>()
        #expect(early.offer(2))
        #expect(early.abandon() == 2, "offered before the caller gave up: the caller cleans it up")
        #expect(early.abandon() == nil, "and only once")
    }

    /// Through a proxy that delays new connections past the deadline: the caller gets `DeadlineExceeded`,
    /// and no session of the late connection stays on the server.
    @Test func aConnectionThatOpensAfterItsDeadlineLeavesNoSession() async throws {
        let database = try await TestDatabases.shared.fresh()
        let proxy = try await TCPProxy.start(targetHost: database.host, targetPort: database.port)
        proxy.delay(.milliseconds(1_200))
        var slow = database
        slow.port = proxy.port
        let name = "upshift-late-\(UInt32.random(in: 0...UInt32.max))"
        await #expect(throws: DeadlineExceeded.self) {
            try await Database.connect(slow, applicationName: name, within: .milliseconds(200), logger: TestEnvironment.logger)
        }
        // The proxy forwards the connection after its delay; PostgreSQL then opens a session for it.
        try await Waits.until("the late connection reaches PostgreSQL", timeout: .seconds(10)) { proxy.forwarded == 1 }
        try await Task.sleep(for: .seconds(1))
        try await withPostgres(database, maximumConnections: 1) { client in
            try await Waits.until("no session of the late connection stays", timeout: .seconds(10)) {
                var sessions = 0
                let rows = try await client.query("SELECT count(*)::int FROM pg_stat_activity WHERE application_name = \(name)")
                for try await count in rows.decode(Int.self) { sessions = count }
                return sessions == 0
            }
        }
        // The same through the proxy without a delay: the connection is the caller's (the bound is long,
        // as a new backend on a machine running the suites in parallel may take seconds to fork).
        proxy.delay(.zero)
        let connection = try await Database.connect(slow, applicationName: name, within: .seconds(30), logger: TestEnvironment.logger)
        #expect(!connection.isClosed)
        try await connection.close()
        await proxy.stop()
    }

    /// A pool that gave up (here: shut down, as after its service stopped; a tripped circuit breaker takes
    /// the same path) fails a statement at once with `DatabaseUnavailable`, which the server answers `503`
    /// with `Retry-After`, never with PostgresNIO's own error (a `500`) and never after a wait.
    @Test func aPoolThatShutDownFailsAtOnceAsUnavailable() async throws {
        let database = try await TestDatabases.shared.fresh()
        let pool = DatabasePool(
            // A wait long enough for a first connection on a loaded machine. Once the pool shut down, the
            // statement fails at once as `poolFailed`: had it waited for a connection, the bound would have
            // passed and the reason would be `busy` (how long "at once" takes depends on the machine's load).
            name: "reads", settings: database, connections: 2, bounds: .init(wait: .seconds(30), answer: .seconds(30)),
            logger: TestEnvironment.logger)
        let running = Task { await pool.client.run() }
        for try await one in try await pool.query("SELECT 1" as SQL, logger: TestEnvironment.logger).decode(Int.self) {
            #expect(one == 1)
        }
        running.cancel()
        await running.value
        do {
            try await pool.query("SELECT 1" as SQL, logger: TestEnvironment.logger)
            Issue.record("a statement on a pool that shut down was answered")
        } catch let error as DatabaseUnavailable {
            guard case .poolFailed = error.reason else {
                Issue.record("expected poolFailed, got \(error)")
                return
            }
            #expect(error.pool == "reads")
        }
    }
}
