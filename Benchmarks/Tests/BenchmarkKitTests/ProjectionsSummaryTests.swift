import Testing

@testable import BenchmarkKit

/// The projections summary, from the raw outputs of a real smoke run, against the summary it printed.
@Suite struct ProjectionsSummaryTests {
    static let projections = ["adoption", "install_state", "prompt_funnel", "release_cohorts"]

    static func report(_ name: String, seconds: String, bytes: Int) throws -> ProjectionsSummary.Report {
        ProjectionsSummary.Report(
            name: name, run: try ReportRun(WrkSummary(parsing: Recorded.text("projections/report-\(name)-wrk.txt"))),
            firstStatus: 200, firstSeconds: seconds, bytes: bytes)
    }

    /// `scripts/bench projections --events 200000 --installs 20000 --lag-duration 10 --report-duration 3`
    /// of 2026-11-24 17:04 (Recorded/projections), with the head, timings, CPU shares and database counts
    /// its summary printed.
    static func recorded() throws -> ProjectionsSummary {
        let facts = RunFacts(
            started: "2026-11-24 17:04:42 UTC",
            machine: MachineDescription(cpus: 2, cpuModel: "AMD EPYC", memory: "23.5 GiB", load: "5.29 5.49 4.59"),
            finishedLoad: "5.32 5.43 4.60", revision: "d1c265c", postgresVersion: "15.18 (Debian 15.18-0+deb12u1)",
            durability: Durability(fsync: "on", synchronousCommit: "on"))
        let load = ProjectionsSummary.BulkLoad(
            events: BulkLoadOutput.events([try Recorded.text("projections/load-0.txt"), try Recorded.text("projections/load-1.txt")]),
            seconds: 2.9, transactions: 10, jobs: 2, vacuumSeconds: 1.5, logSize: "64 MB", eventsInLog: 200_011)
        let catchUp = CatchUp(events: 200_011, start: 1_795_539_890.541, caughtUpAt: [
            "adoption": 1_795_539_893.375167, "install_state": 1_795_539_893.768671,
            "prompt_funnel": 1_795_539_891.484764, "release_cohorts": 1_795_539_892.611629,
        ])
        let lag = LagSummary(
            LagSample.parse(try Recorded.text("projections/lag-samples.txt")), from: LagSamplesTests.liveStart,
            to: LagSamplesTests.liveEnd)
        let live = ProjectionsSummary.Live(
            run: try LiveRun(WrkSummary(parsing: Recorded.text("projections/live-wrk.txt"))), cpu: "98%", lag: lag,
            rowsStored: 20040, drainSeconds: 0.5)
        let rss = RSSSamples(parsing: try Recorded.text("projections/rss.txt"))
        return ProjectionsSummary(
            facts: facts, sharedBuffers: "256MB", app: "fleet", events: 200_000, installs: 20000, lagDurationSeconds: 10,
            reportDurationSeconds: 3, cpus: 2, outputFolder: "/work/wt-bench/.bench/projections-20261124-170442",
            load: load, catchUp: catchUp, catchUpCPU: "100%", catchUpServerCPUSeconds: 0.1,
            reports: [
                try report("adoption", seconds: "0.007601", bytes: 22725),
                try report("release-1.5.0", seconds: "0.404924", bytes: 2685),
                try report("prompts", seconds: "0.082063", bytes: 1356),
                try report("minimum-impact", seconds: "0.018370", bytes: 2533),
            ],
            live: live, liveEventsPerRequest: 20, liveRequestsPerSecond: 100,
            rssCatchUpMiB: rss.peakMiB(from: 1_795_539_890.0, to: 1_795_539_893.8),
            rssLiveMiB: rss.peakMiB(from: LagSamplesTests.liveStart, to: LagSamplesTests.liveEnd), rssPeakMiB: rss.peakMiB(),
            server: ServerUsage(cpuSeconds: 8.4, peakRSSMiB: 56, exitStatus: 0), serverLogLines: 0, rebuild: nil,
            spotCheck: "2026-11-23 2034 2034 0", deadLetters: 0,
            counted: Self.projections.map { ProjectionProgress(name: $0, events: 220_051, caughtUpAt: 1) },
            finalEvents: 220_051)
    }

    @Test func reproducesTheRecordedSummary() throws {
        let summary = try Self.recorded().render()
        var expected = try Recorded.lines("projections/summary.txt")
        // The bash version gave the reports other than adoption no target; the target is p95 <= 100 ms
        // (docs/BENCHMARKS.md, "Performance targets").
        for (name, verdict) in [("release-1.5.0", "MISSED"), ("prompts", "MISSED"), ("minimum-impact", "met")] {
            let index = try #require(expected.firstIndex { $0.hasPrefix("report \(name), p50 / p95") })
            expected[index] = String(expected[index].prefix(86)) + "p95 <= 100 ms        " + verdict
        }
        // The readers' fair shares came after the recorded run, which had none to turn off.
        let limiter = try #require(expected.firstIndex { $0.hasSuffix("none on the reports") })
        expected[limiter] += " (UPSHIFT_READER_RATE=0, UPSHIFT_READER_CONCURRENCY=10000, UPSHIFT_BACKTEST_CONCURRENCY=64)"
        #expect(summary.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == expected)
        #expect(summary.mustsHold)
    }

    /// Reports measured during the live run over several paths say so, each with how many paths it went through.
    @Test func reportsDuringTheLiveRunSaySoWithTheirPaths() throws {
        var summary = try Self.recorded()
        summary.reportsDuringLive = true
        summary.reports[1].name = "release"
        summary.reports[1].paths = 10
        let lines = summary.render().text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("report release (10 paths), p50 / p95") })
        #expect(lines.contains { $0.hasPrefix("reports: wrk -t 1 -c 1 --latency, 3 s each, during the live run") })
        #expect(!lines.contains { $0.contains("before the live run") })
    }

    /// The lag while a projection rebuilds under load, and the longest transaction-id holds, against their
    /// targets; a rebuild that failed fails the run.
    @Test func aRebuildUnderLoadAndTheTransactionIdsAreJudged() throws {
        var summary = try Self.recorded()
        let lag = LagSummary(
            [LagSample(epoch: 10, maximum: 0.4, lags: ["adoption": 0.4]), LagSample(epoch: 10.2, maximum: 1.6, lags: ["adoption": 1.6])],
            from: 10, to: 11)
        summary.rebuildUnderLoad = .init(projection: "release_cohorts", seconds: 171.2, exitStatus: 0, lag: lag, eventsPerSecond: 2000, non2xx: 0, loadSeconds: 300)
        summary.xidHolds = .init(
            catchUp: XidHold(pid: 1, xid: "9", first: 1, last: 4.4, query: "INSERT"), live: nil,
            rebuild: XidHold(pid: 2, xid: "10", first: 1, last: 7, query: "INSERT INTO x"))
        let text = summary.render()
        let lines = text.text.split(separator: "\n").map(String.init)
        let rebuildLine = try #require(lines.first { $0.hasPrefix("lag while release_cohorts rebuilds") })
        #expect(rebuildLine.contains("0.400 / 1.600 / 1.600 s") && rebuildLine.hasSuffix("MISSED"))
        let holdLine = try #require(lines.first { $0.hasPrefix("transaction id held, catch-up / live / rebuild") })
        #expect(holdLine.contains("3.4 / 0 / 6.0 s") && holdLine.hasSuffix("MISSED"))
        #expect(lines.contains("    rebuild: 6.0 s, pid 2, last seen in: INSERT INTO x"))
        #expect(text.mustsHold)
        #expect(!lines.contains { $0.contains("the rebuild outlasted the load") })
        summary.rebuildUnderLoad?.loadSeconds = 120
        #expect(summary.render().text.contains("the rebuild outlasted the load: its lag is of the load's 115 s alone"))
        summary.rebuildUnderLoad?.exitStatus = 1
        #expect(!summary.render().mustsHold)
    }

    /// A second log caught up on a database of its own, 10 s from launch: its figures beside the first's.
    static func secondLog(seconds: Double) -> ProjectionsSummary.SecondLog {
        let load = ProjectionsSummary.BulkLoad(
            events: 300_153, seconds: 12.34, transactions: 6, jobs: 2, vacuumSeconds: 2.1, logSize: "110 MB",
            eventsInLog: 300_163)
        let catchUp = CatchUp(
            events: 300_163, start: 1000, caughtUpAt: Dictionary(uniqueKeysWithValues: projections.map { ($0, 1000 + seconds) }))
        return ProjectionsSummary.SecondLog(
            app: "shape", installs: 30000, days: 60, load: load, types: "checked 150000, launched 120000, updated 30153",
            catchUp: catchUp, cpu: "97%", serverCPUSeconds: 6.5, rssPeakMiB: 61,
            server: ServerUsage(cpuSeconds: 7, peakRSSMiB: 63, exitStatus: 0), serverLogLines: 0,
            spotCheck: "2026-09-26 1500 1500 0", deadLetters: 0,
            counted: projections.map { ProjectionProgress(name: $0, events: 300_163, caughtUpAt: 1) }, finalEvents: 300_163)
    }

    /// Both catch-ups stand in the table against the same target; the second's musts are the first's.
    @Test func aSecondLogsCatchUpIsJudgedBesideTheFirst() throws {
        var run = try Self.recorded()
        let first = run.render().text.split(separator: "\n").map(String.init)
        run.secondLog = Self.secondLog(seconds: 5)
        var summary = run.render()
        var lines = summary.text.split(separator: "\n").map(String.init)
        #expect(summary.mustsHold)
        #expect(lines.contains("SMOKE RUN: the second log's full size is 1,000,000 installs"))
        let row = try #require(lines.firstIndex { $0.hasPrefix("catch-up, second log, by install (from launch)") })
        #expect(lines[row] == "catch-up, second log, by install (from launch)   60,033 events/s, 5.00 s              >= 50,000 events/s   met")
        #expect(lines[row + 1].hasPrefix("  adoption") && lines[row + 4].hasPrefix("  release_cohorts"))
        // Right below the first catch-up and its projections.
        #expect(lines[row - 1].hasPrefix("  release_cohorts") && lines[row - 5].hasPrefix("catch-up, all projections (from launch)"))
        #expect(lines.contains { $0.hasPrefix("RSS of upshift serve, second catch-up, peak      61 MiB (VmHWM 63)") && $0.hasSuffix("met") })
        #expect(lines.contains("    bulk load: 300,153 events in 12.3 s (24,403 events/s; 6 transactions, 2 psql at a time), VACUUM ANALYZE 2.1 s;"))
        #expect(lines.contains("    types: checked 150000, launched 120000, updated 30153"))
        #expect(lines.contains("second log, counted: every projection applied all 300163 events in the log  OK"))
        #expect(lines.contains("second log, dead letters: 0  OK"))
        // Without it, the summary is the first run's alone.
        run.secondLog = nil
        #expect(run.render().text.split(separator: "\n").map(String.init) == first)

        // A missed target is a verdict, as the first catch-up's is; a dead letter or an uncounted event fails.
        run.secondLog = Self.secondLog(seconds: 7)
        summary = run.render()
        lines = summary.text.split(separator: "\n").map(String.init)
        #expect(lines.contains { $0.hasPrefix("catch-up, second log, by install (from launch)   42,880 events/s, 7.00 s") && $0.hasSuffix("MISSED") })
        #expect(summary.mustsHold)
        run.secondLog?.deadLetters = 3
        summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("second log, dead letters: 3 (valid synthetic events should all apply; see projection_dead_letters)  FAILED"))
        run.secondLog = Self.secondLog(seconds: 5)
        run.secondLog?.counted[0].events = 300_000
        summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("second log, counted: NOT ALL: 300163 events in the log, projections: adoption=300000\n"))
        run.secondLog = Self.secondLog(seconds: 5)
        run.secondLog?.installs = 1_000_000
        #expect(!run.render().text.contains("the second log's full size"))
    }

    @Test func catchUpIsTimedToTheLastProjection() throws {
        let catchUp = try Self.recorded().catchUp
        #expect(catchUp.seconds == 3.23)
        #expect(Format.grouped(catchUp.eventsPerSecond) == "61,923")
        #expect(catchUp.projections.map { Format.fixed($0.seconds, 2) } == ["2.83", "3.23", "0.94", "2.07"])
    }

    @Test func writesTheProgressLineOfTheRecordedRun() throws {
        let none = Self.projections.map { ProjectionProgress(name: $0, events: 0, caughtUpAt: nil) }
        let line = CatchUp.progressLine(clock: "17:04:50", elapsed: 0.2, progress: none, total: 200_011)
        #expect(line == (try Recorded.lines("projections/catch-up.txt"))[0])
        let half = [
            ProjectionProgress(name: "adoption", events: 100_000, caughtUpAt: nil),
            ProjectionProgress(name: "install_state", events: 50000, caughtUpAt: nil),
        ]
        #expect(CatchUp.progressLine(clock: "17:05:00", elapsed: 10, progress: half, total: 200_000)
            == "17:05:00 +10s adoption 100000  install_state 50000  | slowest: 5000 events/s, ETA 30 s")
    }

    @Test func anUncountedEventOrADeadLetterFails() throws {
        var run = try Self.recorded()
        run.counted[1].events = 220_050
        var summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("counted: NOT ALL: 220051 events in the log, projections: install_state=220050\n"))
        run = try Self.recorded()
        run.live.drainSeconds = nil
        summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("NOT all counted 120 s after wrk stopped"))
        #expect(summary.text.contains("counted: NOT ALL: 220051 events in the log, projections: (timed out)\n"))
        run = try Self.recorded()
        run.deadLetters = 2
        #expect(!run.render().mustsHold)
    }

    @Test func storedLiveEventsMustBeTheAcceptedOnesOrInFlight() throws {
        var run = try Self.recorded()
        run.live.rowsStored = 20060
        run.live.run.inFlight = 1
        var summary = run.render()
        #expect(summary.mustsHold)
        #expect(summary.text.contains("stored 20060 (+20 of the 1 requests in flight when wrk stopped)  OK"))
        run.live.rowsStored = 20081
        summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("live events: MISMATCH: sent 20040, accepted 20040, stored 20081, requests in flight 1"))
    }

    @Test func aReportThatNeverAnsweredMissesItsTargetAndANon2xxFails() throws {
        var run = try Self.recorded()
        run.reports[1].run.answered2xx = 0
        run.reports[1].firstStatus = 0
        run.reports[1].firstSeconds = "-"
        let summary = run.render()
        #expect(summary.text.contains(
            "report release-1.5.0, first answer               - s (none within wrk's 10 s timeout) p95 <= 100 ms        MISSED"))
        #expect(summary.text.contains("non-2xx: 1 (live POSTs 0, reports 1)"))
        #expect(!summary.mustsHold)
    }

    @Test func aFailedRebuildFails() throws {
        var run = try Self.recorded()
        run.rebuild = .init(projection: "adoption", seconds: 12.34, events: 220_051, peakRSSMiB: 80, failure: nil)
        var summary = run.render()
        #expect(summary.text.contains(
            "rebuild (server stopped): upshift projections rebuild adoption: 220,051 events in 12.3 s = 17,890 events/s, peak RSS 80 MiB"))
        #expect(summary.mustsHold)
        run.rebuild?.failure = "error: relation does not exist"
        summary = run.render()
        #expect(!summary.mustsHold)
    }

    @Test func theFoldIsPrintedBesideTheSetBasedRebuildAgainstTheCatchUpTarget() throws {
        var run = try Self.recorded()
        run.rebuild = .init(projection: "adoption", seconds: 100, events: 10_000_000, peakRSSMiB: 90, failure: nil)
        run.fold = .init(projection: "adoption", seconds: 250, events: 10_000_000, peakRSSMiB: 120, failure: nil)
        var summary = run.render()
        #expect(summary.text.contains(
            "rebuild (server stopped): upshift projections rebuild adoption --in-batches: 10,000,000 events in 250.0 s = 40,000 events/s, peak RSS 120 MiB"))
        #expect(summary.text.contains(
            "the fold of live batches against the set-based backfill: 40,000 against 100,000 events/s; the fold is below the catch-up target of 50,000 events/s"))
        #expect(summary.mustsHold)
        run.fold?.seconds = 200
        #expect(run.render().text.contains("50,000 against 100,000 events/s; the fold is at or above the catch-up target"))
        run.fold?.failure = "error: the connection closed"
        summary = run.render()
        #expect(!summary.text.contains("the fold of live batches"))
        #expect(!summary.mustsHold)
    }
}
