import ArgumentParser

/// `scripts/bench ingest`.
struct Ingest: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "POST /v1/events against raw PostgreSQL inserts into the same table (4 cases), and again beside a report load.")

    @OptionGroup var perCase: CaseDuration

    @Option(help: "UPSHIFT_READ_POOL_CONNECTIONS of upshift serve (default: its default); case (e) asks for reports on \(IngestBenchmark.reportConnections) connections whatever it is.")
    var readsPool = IngestBenchmark.reportConnections

    func validate() throws {
        guard (1...1_000).contains(readsPool) else { throw ValidationError("--reads-pool must be 1 to 1000") }
    }

    func run() throws {
        try BenchmarkRun.run("ingest") { bench in
            var benchmark = IngestBenchmark(bench: bench, duration: perCase.duration, readsPool: readsPool)
            return try benchmark.run()
        }
    }
}
