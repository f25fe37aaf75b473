import Foundation
import Testing
import UpshiftTestSupport

@testable import UpshiftStore

/// The bulk copy path (`StoreConnection.copy`), against PostgreSQL's own reading of `COPY`'s text format.
@Suite struct StoreConnectionCopyTests {
    private static let table = SQLIdentifier("copied")
    private static let columns = ["id", "label", "at", "note"].map(SQLIdentifier.init)

    /// Runs `body` on a connection to a fresh database with the table `copied`, and closes the connection
    /// however `body` ends (PostgresNIO stops a debug build that lets an open connection go).
    /// A failure of the set-up says which step failed and what PostgreSQL said.
    private func withTable(_ body: (StoreConnection) async throws -> Void) async throws {
        let database = try await DatabaseError.revealing("a fresh database") { try await TestDatabases.shared.fresh() }
        let connection = try await DatabaseError.revealing("connecting") {
            try await Database.connect(
                database, applicationName: "upshift-copy-tests", within: .seconds(10), logger: TestEnvironment.logger)
        }
        do {
            try await DatabaseError.revealing("creating the table") {
                try await connection.query(
                    "CREATE TABLE copied (id int PRIMARY KEY, label text NOT NULL, at timestamptz NOT NULL, note uuid)",
                    logger: TestEnvironment.logger)
            }
            try await body(connection)
        } catch {
            try? await connection.close()
            throw error
        }
        if !connection.isClosed { try await connection.close() }
    }

    /// Text with every byte the format escapes, and more rows than one part of the stream holds: what
    /// PostgreSQL stored is what was written, `NULL` where nil was.
    @Test func rowsOfAnyTextArriveAsWritten() async throws {
        try await withTable { connection in
            let awkward = ["tab\there", "line\nbreak", "carriage\rreturn", "back\\slash", "\\N", "", "ünïcødé ✓", "\\.", "end\\"]
            var rows = CopyRows(width: 4)
            var expected: [(Int, String, Int, UUID?)] = []
            for id in 0..<4_000 {
                // About 400 bytes a row: 1.6 MB, more than one part of the stream.
                let label = awkward[id % awkward.count] + String(repeating: "x", count: 400) + awkward[(id * 7) % awkward.count]
                let at = 1_796_000_000 + id
                let note: UUID? = id % 3 == 0 ? nil : UUID()
                rows.append([String(id), label, Date(timeIntervalSince1970: Double(at)).ISO8601Format(), note?.uuidString])
                expected.append((id, label, at, note))
            }
            try await connection.copy(into: Self.table, columns: Self.columns, rows: rows, logger: TestEnvironment.logger)
            var stored: [(Int, String, Int, UUID?)] = []
            for try await row in try await connection.query(
                "SELECT id, label, extract(epoch FROM at)::int, note FROM copied ORDER BY id", logger: TestEnvironment.logger
            ).decode((Int, String, Int, UUID?).self) { stored.append(row) }
            #expect(stored.count == expected.count)
            for (row, want) in zip(stored, expected) where row != want {
                Issue.record("row \(want.0): stored \(row), written \(want)")
                break
            }
        }
    }

    /// A field PostgreSQL cannot read as its column's type fails the whole copy with PostgreSQL's error,
    /// also while later parts of the stream are still being sent; nothing of it is stored, and the
    /// connection goes on answering.
    @Test func aRowPostgreSQLCannotReadFailsTheCopyAndTheConnectionGoesOn() async throws {
        try await withTable { connection in
            var rows = CopyRows(width: 4)
            rows.append(["1", "fine", "2026-12-02 10:00:00+00", nil])
            rows.append(["2", "bad note", "2026-12-02 10:00:00+00", "not-a-uuid"])
            for id in 3..<4_000 { rows.append([String(id), String(repeating: "y", count: 400), "2026-12-02 10:00:00+00", nil]) }
            await #expect(throws: (any Error).self) {
                try await connection.copy(into: Self.table, columns: Self.columns, rows: rows, logger: TestEnvironment.logger)
            }
            var count = -1
            for try await stored in try await connection.query("SELECT count(*)::int FROM copied", logger: TestEnvironment.logger)
                .decode(Int.self)
            { count = stored }
            #expect(count == 0)
        }
    }

    /// On a connection that has closed, a copy fails as a lost connection instead of waiting for ever (the
    /// fault it guards against); the bound leaves room for the suites running beside it.
    @Test func aCopyOnAClosedConnectionFailsInsteadOfWaiting() async throws {
        try await withTable { connection in
            try await DatabaseError.revealing("closing the connection") { try await connection.close() }
            var rows = CopyRows(width: 4)
            rows.append(["1", "late", "2026-12-02 10:00:00+00", nil])
            let started = ContinuousClock.now
            await #expect(throws: ConnectionLost.self) {
                try await connection.copy(into: Self.table, columns: Self.columns, rows: rows, logger: TestEnvironment.logger)
            }
            #expect(ContinuousClock.now - started < .seconds(10))
        }
    }
}
