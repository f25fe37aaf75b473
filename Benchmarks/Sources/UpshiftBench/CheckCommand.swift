import ArgumentParser

/// `scripts/bench check`.
struct Check: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "GET /v1/apps/{app}/check against nginx and a trivial Hummingbird route serving the same bytes.",
        discussion: """
            4 cases and 2 paced latency runs at half the maximum rate, then a memory case under junk queries and \
            distinct questions (peak RSS). Runs under 10 s per case are smoke tests: their figures do not count.
            """)

    @OptionGroup var perCase: CaseDuration

    func run() throws {
        try BenchmarkRun.run("check") { bench in
            try CheckBenchmark(bench: bench, duration: perCase.duration).run()
        }
    }
}
