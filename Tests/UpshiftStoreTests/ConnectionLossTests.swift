import Foundation
import PostgresNIO
import Testing
@testable import UpshiftStore
import UpshiftTestSupport

/// A connection that PostgreSQL closes (a restart, a failover, an administrator's `pg_terminate_backend`)
/// while a large result is on its way, or before the next statement is sent on it: the statement fails,
/// or has every row, the process goes on and nothing waits for ever.
///
/// PostgresNIO's row stream, read as an async sequence, stops reading the socket whenever its reader is
/// behind; if the connection closes then, NIO still delivers the socket's last bytes and a read-complete,
/// and the row stream's state machine traps (a precondition of PostgresNIO 1.33.2: `scripts/chaos` hit it
/// at a PostgreSQL restart, `upshift serve` exiting with SIGILL). The store reads every result whole on
/// the connection's event loop, asking for each next part at once, so that state is never reached.
///
/// PostgresNIO also drops a statement written to a connection that has closed, with its promise, so
/// that its caller waits for ever (a CI run hung here for 20 minutes when the connection closed before
/// the statement was sent). The store writes each statement in the event loop's turn that finds the
/// connection open, and fails it at once otherwise.
@Suite struct ConnectionLossTests {
    /// 20,000 rows of 1 kB: some 20 MB, more than the socket buffers hold, so that PostgreSQL blocks
    /// on sending it unless the client reads.
    static let large: SQL = "SELECT i, repeat('x', 1000) FROM generate_series(1, 20000) AS i"

    @Test func aResultReadLaterIsWholeWhenTheConnectionClosesMeanwhile() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let read = try await client.withConnection { connection in
                let connection = StoreConnection(connection)
                let pid = try await Self.backendPID(connection)
                let rows = try await connection.query(Self.large, logger: TestEnvironment.logger)
                // The reader is busy elsewhere while its connection is closed under it.
                try await Task.sleep(for: .seconds(1))
                try await Self.terminate(pid, through: client)
                try await Task.sleep(for: .milliseconds(500))
                var read = 0
                for try await _ in rows { read += 1 }
                return read
            }
            #expect(read == 20_000)
            try await Self.goesOn(client)
        }
    }

    @Test func aConnectionClosedWhileRowsArriveFailsTheStatement() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let outcome = try await client.withConnection { connection in
                let connection = StoreConnection(connection)
                let pid = try await Self.backendPID(connection)
                // Rows come for some 4 s; the connection is closed after 1 s.
                let closing = Task {
                    try await Task.sleep(for: .seconds(1))
                    try await Self.terminate(pid, through: client)
                }
                let outcome: String
                do {
                    let rows = try await connection.query(
                        "SELECT i, repeat('x', 1000), pg_sleep(0.0002) FROM generate_series(1, 20000) AS i" as SQL,
                        logger: TestEnvironment.logger)
                    var read = 0
                    for try await _ in rows { read += 1 }
                    outcome = "read \(read) rows"
                } catch {
                    outcome = "failed: \(String(reflecting: error).prefix(200))"
                }
                try await closing.value
                return outcome
            }
            #expect(outcome.hasPrefix("failed"), "\(outcome)")
            try await Self.goesOn(client)
        }
    }

    @Test func aStatementOnAConnectionThatClosedFailsAtOnce() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            try await client.withConnection { connection in
                let connection = StoreConnection(connection)
                try await Self.terminate(try await Self.backendPID(connection), through: client)
                // Closed, and a moment later without the handlers that would have failed a statement.
                while !connection.isClosed { try await Task.sleep(for: .milliseconds(10)) }
                try await Task.sleep(for: .milliseconds(200))
                for attempt in ["a statement", "a transaction", "a prepared statement"] {
                    // Bounded, so that the test fails rather than hangs where the fault is back: the fault
                    // then ends in `DeadlineExceeded`, and failing at once in `ConnectionLost`.
                    var failure: (any Error)?
                    do {
                        try await withDeadline(.seconds(10)) {
                            if attempt == "a statement" {
                                try await connection.query("SELECT 1" as SQL, logger: TestEnvironment.logger)
                            } else if attempt == "a prepared statement" {
                                _ = try await connection.rows(prepared: SelectOne(), logger: TestEnvironment.logger)
                            } else {
                                _ = try await connection.transaction(logger: TestEnvironment.logger) { connection in
                                    try await connection.query("SELECT 1" as SQL, logger: TestEnvironment.logger)
                                }
                            }
                        }
                    } catch {
                        failure = error
                    }
                    #expect(failure is ConnectionLost, "\(attempt): \(String(describing: failure))")
                }
            }
            try await Self.goesOn(client)
        }
    }

    /// A prepared statement (the ingestion writer's insert is one).
    struct SelectOne: PostgresPreparedStatement {
        typealias Row = Int64
        static let sql = "SELECT 1::int8"
        func makeBindings() throws -> PostgresBindings { PostgresBindings() }
        func decodeRow(_ row: PostgresRow) throws -> Int64 { try row.decode(Int64.self) }
    }

    static func backendPID(_ connection: StoreConnection) async throws -> Int32 {
        for try await pid in try await connection.query("SELECT pg_backend_pid()" as SQL, logger: TestEnvironment.logger)
            .decode(Int32.self)
        {
            return pid
        }
        throw PostgresError.protocol("no pid")
    }

    /// Closes the connection of backend `pid` from another connection of `client`.
    static func terminate(_ pid: Int32, through client: PostgresClient) async throws {
        let rows = try await DatabasePool(client: client, logger: TestEnvironment.logger)
            .query("SELECT pg_terminate_backend(\(pid))" as SQL, logger: TestEnvironment.logger)
        for try await terminated in rows.decode(Bool.self) { #expect(terminated) }
    }

    /// The client goes on: a statement through its pool is answered. The pool may lend the connection
    /// that closed once more before it learns of the close (that statement fails at once), not more.
    static func goesOn(_ client: PostgresClient) async throws {
        let pool = DatabasePool(client: client, logger: TestEnvironment.logger)
        var answered = false
        for _ in 1...3 where !answered {
            do {
                for try await one in try await pool.query("SELECT 1" as SQL, logger: TestEnvironment.logger).decode(Int.self) {
                    answered = one == 1
                }
            } catch let error as DatabaseUnavailable where error.reason == .connectionLost {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(answered)
    }
}
