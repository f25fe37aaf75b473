import Foundation
import PostgresNIO
import Testing
import UpshiftStore
import UpshiftTestSupport

/// A connection that PostgreSQL closes while a large result is on its way (a restart, a failover, an
/// administrator's `pg_terminate_backend`): the statement fails, or has every row, and the process goes on.
///
/// PostgresNIO's row stream, read as an async sequence, stops reading the socket whenever its reader is
/// behind; if the connection closes then, NIO still delivers the socket's last bytes and a read-complete,
/// and the row stream's state machine traps (a precondition of PostgresNIO 1.33.2: `scripts/chaos` hit it
/// at a PostgreSQL restart, `upshift serve` exiting with SIGILL). The store reads every result whole on
/// the connection's event loop, asking for each next part at once, so that state is never reached.
@Suite struct ConnectionLossTests {
    /// 20,000 rows of 1 kB: some 20 MB, more than the socket buffers hold, so that PostgreSQL blocks
    /// on sending it unless the client reads.
    static let large: SQL = "SELECT i, repeat('x', 1000) FROM generate_series(1, 20000) AS i"

    @Test func aResultReadLaterIsWholeWhenTheConnectionClosesMeanwhile() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let read = try await client.withConnection { connection in
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
            // The client goes on with another connection.
            try await Self.terminate(nil, through: client)
        }
    }

    @Test func aConnectionClosedWhileRowsArriveFailsTheStatement() async throws {
        let database = try await TestDatabases.shared.fresh()
        try await withPostgres(database) { client in
            let outcome = try await client.withConnection { connection in
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
            try await Self.terminate(nil, through: client)
        }
    }

    static func backendPID(_ connection: PostgresConnection) async throws -> Int32 {
        for try await pid in try await connection.query("SELECT pg_backend_pid()" as SQL, logger: TestEnvironment.logger)
            .decode(Int32.self)
        {
            return pid
        }
        throw PostgresError.protocol("no pid")
    }

    /// Closes the connection of backend `pid` from another connection; nil: only asks that one answers.
    static func terminate(_ pid: Int32?, through client: PostgresClient) async throws {
        let rows = try await client.query("SELECT coalesce(pg_terminate_backend(\(pid)), true)")
        for try await terminated in rows.decode(Bool.self) { #expect(terminated) }
    }
}
