import ArgumentParser
import BenchmarkKit
import Foundation

/// The benchmarks of the performance targets (docs/BENCHMARKS.md, "Performance targets"): Upshift and
/// its raw reference, side by side on this machine, in one run. `scripts/bench` installs the tools,
/// provisions PostgreSQL and builds `upshift`, then runs this.
@main
struct UpshiftBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "scripts/bench",
        abstract: "Benchmarks of DESIGN.md section 10: Upshift and its raw reference, side by side, in one run.",
        discussion: """
            Raw outputs of every tool go to .bench/<subcommand>-<time>/ (git-ignored); .bench/<subcommand>-latest \
            points at the newest. Exit status: 0 when every "must" holds (0 non-2xx; every acknowledged event or \
            observed check stored, and every other stored row from a request that was sent but not answered 2xx; \
            no observation dropped; for projections, every event counted by every projection and no dead letter; \
            fsync and synchronous_commit on), 1 otherwise; a missed target alone does not fail. Needs root or sudo \
            to install wrk, pgbench and psql (and nginx for check) when they are missing.
            """,
        subcommands: [Ingest.self, Check.self, Projections.self, Catalog.self, Memory.self, Chaos.self])
}

/// Runs one benchmark: its output folder, its summary, and every process it started stopped at the end.
enum BenchmarkRun {
    /// scripts/bench first runs the program with UPSHIFT_BENCH_ARGUMENTS_ONLY=1, to check the arguments
    /// before it installs or builds anything.
    static func run(_ name: String, _ benchmark: (Bench) throws -> Summary) throws {
        if ProcessInfo.processInfo.environment["UPSHIFT_BENCH_ARGUMENTS_ONLY"] == "1" { return }
        ChildProcesses.shared.stopOnSignals()
        defer { ChildProcesses.shared.stopAll() }
        let bench = try Bench(name, environment: BenchEnvironment.current())
        try bench.finish(benchmark(bench))
    }
}

/// `--duration`: how long each case of `ingest` and `check` runs.
struct CaseDuration: ParsableArguments {
    @Option(help: "Seconds per case.")
    var duration = 15

    func validate() throws {
        guard duration > 0 else { throw ValidationError("--duration must be a whole number of seconds above 0") }
    }
}
