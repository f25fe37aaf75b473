import Testing

@testable import BenchmarkKit

@Suite struct PgbenchResultTests {
    @Test(arguments: [("ingest/a-pgbench.txt", 1259.201350, 18895), ("ingest/c-pgbench.txt", 16108.552156, 241_622)])
    func readsARecordedRun(file: String, tps: Double, processed: Int) throws {
        let output = try Recorded.text(file)
        let result = try PgbenchResult(parsing: output)
        #expect(result.transactionsPerSecond == tps)
        #expect(result.failedTransactions == 0)
        #expect(output.contains("number of transactions actually processed: \(processed)"))
    }

    @Test func readsFailedTransactions() throws {
        let output = "number of failed transactions: 12 (0.004%)\ntps = 99.5 (without initial connection time)\n"
        #expect(try PgbenchResult(parsing: output) == PgbenchResult(transactionsPerSecond: 99.5, failedTransactions: 12))
    }

    /// pgbench before PostgreSQL 15 prints no failed transactions (it stops at the first error).
    @Test func countsNoFailuresWhenTheVersionPrintsNone() throws {
        let output = "number of transactions actually processed: 10\ntps = 5.000000 (excluding connections establishing)\n"
        #expect(try PgbenchResult(parsing: output).failedTransactions == 0)
    }

    @Test func refusesAnOutputWithoutTPS() {
        #expect(throws: BenchParseError.self) {
            try PgbenchResult(parsing: "pgbench: error: connection to server failed\n")
        }
    }
}
