import ArgumentParser

extension ProjectionName: ExpressibleByArgument {}

/// `scripts/bench projections`.
struct Projections: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Catch-up, report latency and projection lag on a bulk-loaded log.",
        discussion: """
            Bulk-loads the events of one app over 90 days with SQL, then measures: the catch-up of all \
            projections by upshift serve (events/s, RSS), report latency (wrk, 1 connection), projection lag at \
            a steady 2,000 events/s through POST /v1/events, with --rebuild-live the lag while a projection \
            rebuilds from zero under that load, and with --rebuild `upshift projections rebuild PROJECTION` alone \
            (server stopped). How long any transaction held a transaction id is sampled throughout. Then, on a \
            database of its own, the catch-up of a second log shaped unlike the first: --shape-installs installs \
            with about 10 events each over 60 days, written install by install in a few large transactions, every \
            event type. The full run takes about 30-40 minutes and some GB of disk; smoke test with e.g. \
            --events 300000 --installs 30000 --lag-duration 30 --shape-installs 30000.
            """)

    @Option(help: "Events to load.")
    var events = 10_000_000

    @Option(help: "Installs they come from.")
    var installs = 1_000_000

    @Option(help: "Seconds of live load while the lag is sampled.")
    var lagDuration = 300

    @Option(help: "Seconds of wrk per report.")
    var reportDuration = 10

    @Option(help: "Also time `upshift projections rebuild` of this projection, the server stopped.")
    var rebuild: ProjectionName?

    @Flag(help: """
        With --rebuild, also time the same rebuild --in-batches: the Swift fold of the live path over the whole \
        log, beside the set-based backfill.
        """)
    var fold = false

    @Option(help: """
        After the live run, rebuild this projection from zero with `upshift projections rebuild` while the \
        live load runs again for --rebuild-duration seconds, and sample the lag of the projections that serve meanwhile.
        """)
    var rebuildLive: ProjectionName?

    @Option(help: """
        Seconds of the live load during --rebuild-live (default: --lag-duration); longer than the rebuild, so that \
        the lag is sampled until it ends.
        """)
    var rebuildDuration: Int?

    @Option(help: "Installs of the second catch-up's log (about 10 events each); 0 skips it.")
    var shapeInstalls = 1_000_000

    @Option(help: """
        After the live runs, erase this many installs (`upshift installs forget`) while the live load runs again for \
        --rebuild-duration seconds, and time until every erasure is done; 0 skips it.
        """)
    var erase = 0

    func validate() throws {
        for (name, value) in [("events", events), ("installs", installs), ("lag-duration", lagDuration),
                              ("report-duration", reportDuration), ("rebuild-duration", rebuildDuration ?? 1)] where value <= 0 {
            throw ValidationError("--\(name) must be a positive whole number, not \(value)")
        }
        guard events >= installs else {
            throw ValidationError("--events (\(events)) must be at least --installs (\(installs)): every install is seen")
        }
        guard installs >= 100 else { throw ValidationError("--installs must be at least 100") }
        guard !fold || rebuild != nil else { throw ValidationError("--fold needs --rebuild PROJECTION") }
        guard erase >= 0 && erase <= 10_000 else { throw ValidationError("--erase must be 0 to 10000, not \(erase)") }
        guard shapeInstalls == 0 || shapeInstalls >= 100 else {
            throw ValidationError("--shape-installs must be 0 (no second catch-up) or at least 100, not \(shapeInstalls)")
        }
    }

    func run() throws {
        try BenchmarkRun.run("projections") { bench in
            try ProjectionsBenchmark(
                bench: bench, events: events, installs: installs, lagDuration: lagDuration,
                reportDuration: reportDuration, rebuild: rebuild, fold: fold, rebuildLive: rebuildLive,
                rebuildDuration: rebuildDuration ?? lagDuration, shapeInstalls: shapeInstalls, erase: erase
            ).run()
        }
    }
}
