import BenchmarkKit
import Foundation

/// The second catch-up of `scripts/bench projections`: the catch-up target (docs/BENCHMARKS.md,
/// "Performance targets") on a log shaped unlike the main one. `shapeInstalls` installs with 3-20 events each
/// (about 10) over 60 days, written install by install in a few large transactions, every event type, OS
/// majors and update delays varying by install (scripts/bench.d/projections-load-installs.sql), on a database
/// of its own.
extension ProjectionsBenchmark {
    static let shapeApp = "shape"
    static let shapeDatabase = "upshift_bench_projections_shape"
    static let shapeDays = 60
    /// Its releases, the first before the history starts; forced once an offered release is 30 days out.
    static let shapeReleases = [
        ("2.0.0", 64, 15), ("2.1.0", 52, 15), ("2.1.1", 48, 15), ("2.2.0", 38, 15), ("2.3.0", 27, 16),
        ("2.3.1", 24, 16), ("2.4.0", 13, 17), ("2.5.0", 4, 17),
    ].map { SyntheticLog.Release(version: $0.0, daysAgo: $0.1, minimumOS: $0.2) }
    /// Every type the load writes: every type the server stores (docs/openapi.yaml, schema "EventType").
    static let shapeTypes = [
        "launched", "checked", "prompt_shown", "prompt_dismissed", "update_started", "updated", "blocked",
        "whats_new_shown", "abnormal_exit",
    ]

    /// Transactions of 2 M events or fewer on average (the later slices hold more: installs accumulate),
    /// each a slice of the 60 days; and enough of them that the slices loaded at once, whose feed order is
    /// the order their transactions began, stay within the 31 days projections keep adoption days open
    /// (see the script): 6 on 2 cores.
    var shapeLog: SyntheticLog {
        let jobs = bench.cpus
        let transactions = max((shapeInstalls * 10 + 1_999_999) / 2_000_000, ((jobs + 1) * Self.shapeDays + 29) / 30)
        return SyntheticLog(
            app: Self.shapeApp, name: "Shape", days: Self.shapeDays, releases: Self.shapeReleases,
            policy: ["--enabled", "true", "--block-after-days", "30"], script: "projections-load-installs.sql",
            variables: [("installs", "\(shapeInstalls)")], transactions: transactions, jobs: min(jobs, transactions),
            expectedEvents: nil,
            description: "\(shapeInstalls) installs, 3-20 events each, over \(Self.shapeDays) days, install by install",
            files: "shape-")
    }

    /// Recreates its database, creates the catalog, loads the log, and times the catch-up of every
    /// projection by `upshift serve` with the main catch-up's settings; then stops the server.
    func shapeCatchUp() throws -> ProjectionsSummary.SecondLog {
        let history = shapeLog
        try bench.recreateDatabase(Self.shapeDatabase)
        let end = Int(Date().timeIntervalSince1970)
        try createCatalog(history, end: end)
        let load = try bulkLoad(history, end: end)
        let typesFile = bench.path("\(history.files)load-types.txt")
        let types = PsqlOutput(parsing: (try? String(contentsOfFile: typesFile, encoding: .utf8)) ?? "").rows
            .filter { $0.count == 2 && Self.shapeTypes.contains($0[0]) }.map { ($0[0], Int($0[1]) ?? 0) }
        let missing = Self.shapeTypes.filter { type in !types.contains { $0.0 == type } }
        guard missing.isEmpty else {
            throw BenchFailure("the second log has no event of type \(missing.joined(separator: ", ")) (\(typesFile))")
        }
        let run = try catchUp(total: load.eventsInLog, files: history.files)
        // Its oldest whole day: the first to close, were the feed's order to close it early.
        let spotCheck = self.spotCheck(
            app: history.app, day: Date(timeIntervalSince1970: Double(end - (history.days - 1) * 86400)))
        let deadLetters = try bench.sqlInteger("SELECT count(*) FROM projection_dead_letters")
        let finalEvents = try bench.countEvents()
        let counted = try progress(reaching: finalEvents)
        let usage = try bench.stop(run.server)
        run.sampler.stop()
        let rss = RSSSamples(
            parsing: (try? String(contentsOfFile: bench.path("\(history.files)rss.txt"), encoding: .utf8)) ?? "")
        return ProjectionsSummary.SecondLog(
            app: history.app, installs: shapeInstalls, days: history.days, load: load,
            types: types.map { "\($0.0) \($0.1)" }.joined(separator: ", "), catchUp: run.figures, cpu: run.cpu,
            serverCPUSeconds: run.serverCPUSeconds, rssPeakMiB: rss.peakMiB(from: run.start, to: run.end), server: usage,
            serverLogLines: bench.logLines(run.server), spotCheck: spotCheck, deadLetters: deadLetters, counted: counted,
            finalEvents: finalEvents)
    }
}
