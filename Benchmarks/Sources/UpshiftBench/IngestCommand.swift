import ArgumentParser

/// `scripts/bench ingest`.
struct Ingest: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "POST /v1/events against raw PostgreSQL inserts into the same table (4 cases).")

    @OptionGroup var perCase: CaseDuration

    func run() throws {
        try BenchmarkRun.run("ingest") { bench in
            var benchmark = IngestBenchmark(bench: bench, duration: perCase.duration)
            return try benchmark.run()
        }
    }
}
