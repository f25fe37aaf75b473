import ArgumentParser
import BenchmarkKit
import Foundation

/// `scripts/chaos`: faults under load against a release build of `upshift serve`.
struct Chaos: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Faults under load: three SIGKILLs of upshift serve, a PostgreSQL restart and a partition, then the proofs.",
        usage: "scripts/chaos [--duration <seconds>] [--seed <n>] [--recovery-bound <seconds>] [--events-rate <n>] [--checks-rate <n>]",
        discussion: """
            Runs a release `upshift serve` on a PostgreSQL cluster of its own (scripts/chaos provisions it in \
            .chaos/pg), loopback only, under sustained ingestion (half in batches of 1, half in batches of 100, \
            a tenth of the batches resent, half of those while the first attempt is in flight) and checks with \
            install ids. At moments drawn from the seed it kills the server with SIGKILL three times, restarting \
            it each time, restarts PostgreSQL once with `pg_ctl restart -m immediate` while the server runs, and \
            once drops every packet between the server and PostgreSQL for 9 s (an nftables rule on 127.0.0.2, \
            the address the server reaches PostgreSQL through; it needs root), as when the server's host vanishes. \
            Then it proves: every event acknowledged with 200 is stored exactly once (event_log, by id); while \
            PostgreSQL was down the check answered 200 and POST /v1/events 503 with Retry-After, never 500; \
            ingestion recovered within the bound after PostgreSQL returned, without a server restart; every \
            projection equals a fresh rebuild (upshift projections rebuild), table for table. Raw outputs go to \
            .chaos/run-<time>/. Exit status: 0 when every proof holds, 1 otherwise.
            """)

    @Option(help: "Seconds of load (at least \(Int(ChaosPlan.minimumDuration))).")
    var duration = 300

    @Option(help: "The seed of the plan and the load (default: a new one, printed); the same seed replays the plan.")
    var seed: UInt64?

    @Option(help: "Seconds within which ingestion must recover after PostgreSQL returns.")
    var recoveryBound = ChaosSummary.recoveryTarget

    @Option(help: "Events per second offered (first attempts).")
    var eventsRate = 500.0

    @Option(help: "Checks per second offered, each with an install id.")
    var checksRate = 200.0

    func validate() throws {
        guard Double(duration) >= ChaosPlan.minimumDuration else {
            throw ValidationError("--duration must be at least \(Int(ChaosPlan.minimumDuration)) seconds")
        }
        guard recoveryBound > 0 else { throw ValidationError("--recovery-bound must be above 0") }
        guard eventsRate >= 2, checksRate > 0 else {
            throw ValidationError("--events-rate must be at least 2 and --checks-rate above 0")
        }
    }

    func run() throws {
        if ProcessInfo.processInfo.environment["UPSHIFT_BENCH_ARGUMENTS_ONLY"] == "1" { return }
        ChildProcesses.shared.stopOnSignals()
        defer { ChildProcesses.shared.stopAll() }
        var system = SystemRandomNumberGenerator()
        let seed = seed ?? system.next()
        log("seed \(seed) (scripts/chaos --seed \(seed) replays the plan)")
        let bench = try Bench("run", environment: BenchEnvironment.current(), folder: ".chaos")
        var run = ChaosRun(
            bench: bench, postgres: try ChaosPostgres.current(), plan: ChaosPlan(seed: seed, duration: Double(duration)),
            eventsPerSecond: eventsRate, checksPerSecond: checksRate, recoveryBound: recoveryBound)
        try bench.finish(run.run())
    }
}
