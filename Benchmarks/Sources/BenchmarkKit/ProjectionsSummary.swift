/// `scripts/bench projections`: catch-up of a bulk-loaded log, report latency, and projection lag under a
/// steady live load (docs/BENCHMARKS.md, "Performance targets": projection catch-up, lag, reports,
/// memory).
public struct ProjectionsSummary: Sendable {
    /// The synthetic history loaded with SQL before `upshift serve` starts.
    public struct BulkLoad: Sendable, Equatable {
        public var events: Int
        public var seconds: Double
        /// Transactions (slices of the 90 days) and how many psql ran at once.
        public var transactions: Int
        public var jobs: Int
        public var vacuumSeconds: Double
        /// event_log with its indexes, as pg_size_pretty prints it.
        public var logSize: String
        /// In the log when the catch-up started, catalog events included.
        public var eventsInLog: Int

        public init(
            events: Int, seconds: Double, transactions: Int, jobs: Int, vacuumSeconds: Double, logSize: String,
            eventsInLog: Int
        ) {
            self.events = events
            self.seconds = seconds
            self.transactions = transactions
            self.jobs = jobs
            self.vacuumSeconds = vacuumSeconds
            self.logSize = logSize
            self.eventsInLog = eventsInLog
        }
    }

    /// One report measured with wrk on one connection, after its first answer was timed with curl.
    public struct Report: Sendable, Equatable {
        public var name: String
        public var run: ReportRun
        /// The first request: its status (0 when it failed) and seconds ("5.660000", or "-").
        public var firstStatus: Int
        public var firstSeconds: String
        /// Bytes of the first answer.
        public var bytes: Int
        /// The paths wrk went through in turn (another release, target or window each time).
        public var paths: Int

        public init(name: String, run: ReportRun, firstStatus: Int, firstSeconds: String, bytes: Int, paths: Int = 1) {
            self.name = name
            self.run = run
            self.firstStatus = firstStatus
            self.firstSeconds = firstSeconds
            self.bytes = bytes
            self.paths = paths
        }

        /// The wrk run's non-2xx, and the first request's when it was not 2xx.
        public var non2xx: Int { run.non2xx + ((200...299).contains(firstStatus) ? 0 : 1) }

        var target: Target {
            switch name {
            case "adoption": Targets.adoptionReport
            case "backtest": Targets.backtest
            default: Targets.otherReports
            }
        }
    }

    /// The live load and what the database held after it.
    public struct Live: Sendable, Equatable {
        public var run: LiveRun
        public var cpu: String
        public var lag: LagSummary
        /// Rows added to the log during the live run.
        public var rowsStored: Int
        /// Seconds after wrk stopped until every projection had counted every event; nil when that took
        /// over 120 s.
        public var drainSeconds: Double?

        public init(run: LiveRun, cpu: String, lag: LagSummary, rowsStored: Int, drainSeconds: Double?) {
            self.run = run
            self.cpu = cpu
            self.lag = lag
            self.rowsStored = rowsStored
            self.drainSeconds = drainSeconds
        }
    }

    /// `upshift projections rebuild NAME` with the server stopped.
    public struct Rebuild: Sendable, Equatable {
        public var projection: String
        public var seconds: Double
        public var events: Int
        public var peakRSSMiB: Double?
        /// The first error line when it failed.
        public var failure: String?

        public init(projection: String, seconds: Double, events: Int, peakRSSMiB: Double?, failure: String?) {
            self.projection = projection
            self.seconds = seconds
            self.events = events
            self.peakRSSMiB = peakRSSMiB
            self.failure = failure
        }

        /// Events over the seconds as printed (one decimal).
        var eventsPerSecond: Double {
            let seconds = Format.printed(seconds, 1)
            return seconds > 0 ? Double(events) / seconds : 0
        }
    }

    /// The longest hold of a transaction id seen during the catch-up, the live run and a rebuild under load.
    public struct XidHolds: Sendable, Equatable {
        public var catchUp: XidHold?
        public var live: XidHold?
        public var rebuild: XidHold?

        public init(catchUp: XidHold?, live: XidHold?, rebuild: XidHold?) {
            self.catchUp = catchUp
            self.live = live
            self.rebuild = rebuild
        }

        /// No transaction of a catch-up, rebuild or backfill holds an id for more than 5 s (docs/OPERATIONS.md).
        public static let limitSeconds = 5.0

        var longest: XidHold? { [catchUp, live, rebuild].compactMap { $0 }.max { $0.seconds < $1.seconds } }
    }

    /// Installs erased (`upshift installs forget`) while the live load ran again (`--erase`).
    public struct ErasureUnderLoad: Sendable, Equatable {
        public var installs: Int
        /// Their events in the log before.
        public var events: Int
        /// From the first request until every one was done; nil when they were not done within 30 minutes.
        public var seconds: Double?
        /// Their events from before the first request still in the log afterwards (0 when erased; the live
        /// load's events of them since are new data).
        public var eventsLeft: Int
        /// Of the active generations, from the first request until all were done (or the load ended).
        public var lag: LagSummary
        public var eventsPerSecond: Double
        public var non2xx: Int
        public var loadSeconds: Int

        public init(
            installs: Int, events: Int, seconds: Double?, eventsLeft: Int, lag: LagSummary, eventsPerSecond: Double,
            non2xx: Int, loadSeconds: Int
        ) {
            self.installs = installs
            self.events = events
            self.seconds = seconds
            self.eventsLeft = eventsLeft
            self.lag = lag
            self.eventsPerSecond = eventsPerSecond
            self.non2xx = non2xx
            self.loadSeconds = loadSeconds
        }
    }

    /// A projection rebuilt from zero by the CLI while the live load ran again.
    public struct RebuildUnderLoad: Sendable, Equatable {
        public var projection: String
        public var seconds: Double
        public var exitStatus: Int32
        /// Of the active generations, from the rebuild's start to its end (or the load's).
        public var lag: LagSummary
        public var eventsPerSecond: Double
        public var non2xx: Int
        /// How long the second live load ran (`--rebuild-duration`).
        public var loadSeconds: Int

        public init(
            projection: String, seconds: Double, exitStatus: Int32, lag: LagSummary, eventsPerSecond: Double, non2xx: Int,
            loadSeconds: Int
        ) {
            self.projection = projection
            self.seconds = seconds
            self.exitStatus = exitStatus
            self.lag = lag
            self.eventsPerSecond = eventsPerSecond
            self.non2xx = non2xx
            self.loadSeconds = loadSeconds
        }
    }

    /// The catch-up of a second log, shaped unlike the first: installs with about 10 events each over 60
    /// days, written install by install in a few large transactions, every event type, on a database of its
    /// own after the first run's server stopped.
    public struct SecondLog: Sendable, Equatable {
        public var app: String
        public var installs: Int
        public var days: Int
        public var load: BulkLoad
        /// "type count, ..." of the client events loaded, most first.
        public var types: String
        public var catchUp: CatchUp
        /// How busy all CPUs were during the catch-up, and the server's CPU seconds then.
        public var cpu: String
        public var serverCPUSeconds: Double
        /// VmRSS peak of `upshift serve` during the catch-up, in MiB.
        public var rssPeakMiB: Double?
        public var server: ServerUsage
        public var serverLogLines: Int
        /// The adoption spot check of its oldest whole day.
        public var spotCheck: String
        public var deadLetters: Int
        public var counted: [ProjectionProgress]
        public var finalEvents: Int

        public init(
            app: String, installs: Int, days: Int, load: BulkLoad, types: String, catchUp: CatchUp, cpu: String,
            serverCPUSeconds: Double, rssPeakMiB: Double?, server: ServerUsage, serverLogLines: Int, spotCheck: String,
            deadLetters: Int, counted: [ProjectionProgress], finalEvents: Int
        ) {
            self.app = app
            self.installs = installs
            self.days = days
            self.load = load
            self.types = types
            self.catchUp = catchUp
            self.cpu = cpu
            self.serverCPUSeconds = serverCPUSeconds
            self.rssPeakMiB = rssPeakMiB
            self.server = server
            self.serverLogLines = serverLogLines
            self.spotCheck = spotCheck
            self.deadLetters = deadLetters
            self.counted = counted
            self.finalEvents = finalEvents
        }
    }

    public var facts: RunFacts
    public var sharedBuffers: String
    public var app: String
    public var events: Int
    public var installs: Int
    public var lagDurationSeconds: Int
    public var reportDurationSeconds: Int
    public var cpus: Int
    public var outputFolder: String
    public var load: BulkLoad
    public var catchUp: CatchUp
    /// How busy all CPUs were during the catch-up, and the server's CPU seconds then.
    public var catchUpCPU: String
    public var catchUpServerCPUSeconds: Double
    public var reports: [Report]
    /// Whether the reports were measured while the live load ran (else after the catch-up, before it).
    public var reportsDuringLive = false
    /// Nil in older recorded runs.
    public var xidHolds: XidHolds?
    public var rebuildUnderLoad: RebuildUnderLoad?
    public var erasureUnderLoad: ErasureUnderLoad?
    /// Nil when skipped (`--shape-installs 0`), and in runs from before it.
    public var secondLog: SecondLog?
    public var live: Live
    /// Events per request and requests per second of the live load.
    public var liveEventsPerRequest: Int
    public var liveRequestsPerSecond: Int
    /// VmRSS peaks of `upshift serve` in MiB during the catch-up, the live run and the whole run, and its
    /// VmHWM at the end.
    public var rssCatchUpMiB: Double?
    public var rssLiveMiB: Double?
    public var rssPeakMiB: Double?
    public var server: ServerUsage
    public var serverLogLines: Int
    public var rebuild: Rebuild?
    /// The same rebuild `--in-batches`: the Swift fold of live batches over the whole log (`--fold`).
    public var fold: Rebuild?
    /// "day installs-in-log installs-in-adoption_daily versions-differing", or "failed: ...".
    public var spotCheck: String
    public var deadLetters: Int
    /// Every active projection's events when the run ended, and the events in the log then.
    public var counted: [ProjectionProgress]
    public var finalEvents: Int

    public init(
        facts: RunFacts, sharedBuffers: String, app: String, events: Int, installs: Int, lagDurationSeconds: Int,
        reportDurationSeconds: Int, cpus: Int, outputFolder: String, load: BulkLoad, catchUp: CatchUp,
        catchUpCPU: String, catchUpServerCPUSeconds: Double, reports: [Report], live: Live, liveEventsPerRequest: Int,
        liveRequestsPerSecond: Int, rssCatchUpMiB: Double?, rssLiveMiB: Double?, rssPeakMiB: Double?,
        server: ServerUsage, serverLogLines: Int, rebuild: Rebuild?, spotCheck: String, deadLetters: Int,
        counted: [ProjectionProgress], finalEvents: Int
    ) {
        self.facts = facts
        self.sharedBuffers = sharedBuffers
        self.app = app
        self.events = events
        self.installs = installs
        self.lagDurationSeconds = lagDurationSeconds
        self.reportDurationSeconds = reportDurationSeconds
        self.cpus = cpus
        self.outputFolder = outputFolder
        self.load = load
        self.catchUp = catchUp
        self.catchUpCPU = catchUpCPU
        self.catchUpServerCPUSeconds = catchUpServerCPUSeconds
        self.reports = reports
        self.live = live
        self.liveEventsPerRequest = liveEventsPerRequest
        self.liveRequestsPerSecond = liveRequestsPerSecond
        self.rssCatchUpMiB = rssCatchUpMiB
        self.rssLiveMiB = rssLiveMiB
        self.rssPeakMiB = rssPeakMiB
        self.server = server
        self.serverLogLines = serverLogLines
        self.rebuild = rebuild
        self.spotCheck = spotCheck
        self.deadLetters = deadLetters
        self.counted = counted
        self.finalEvents = finalEvents
    }

    /// What the performance targets ask of a run whose figures count (docs/BENCHMARKS.md, "Performance
    /// targets"): a backlog of 10 M events, 5 minutes of live load.
    public static let fullEvents = 10_000_000
    public static let fullLagSeconds = 300
    /// What the issue that added the second log asks of it.
    public static let fullSecondLogInstalls = 1_000_000

    static let table = TextTable([.left(48), .left(36), .left(20), .left(0)])

    /// The catch-up target a fold would have to reach to replace the set-based backfill (events/s).
    static let catchUpTarget = 50_000.0

    /// One line for `upshift projections rebuild` with the server stopped; a failure fails the run.
    private func rebuildLine(_ rebuild: Rebuild, how: String, into out: inout SummaryWriter) {
        let command = "rebuild (server stopped): upshift projections rebuild \(rebuild.projection)\(how)"
        if let failure = rebuild.failure {
            out.line("\(command) FAILED after \(Format.fixed(rebuild.seconds, 1)) s: \(failure)")
            out.fail()
        } else {
            out.line("\(command): \(Format.grouped(rebuild.events)) events in \(Format.fixed(rebuild.seconds, 1)) s = \(Format.grouped(rebuild.eventsPerSecond)) events/s, peak RSS \(mib(rebuild.peakRSSMiB)) MiB")
        }
    }

    public func render() -> Summary {
        var out = SummaryWriter()
        out.line("Upshift projections benchmark: \(Format.grouped(events)) events of \(Format.grouped(installs)) installs (app \(app), ios, 90 days), \(facts.started)")
        if events < Self.fullEvents || lagDurationSeconds < Self.fullLagSeconds {
            out.line("SMOKE RUN: DESIGN.md section 10 asks for a 10 M event backlog and 5 minutes of live load")
        }
        if let second = secondLog, second.installs < Self.fullSecondLogInstalls {
            out.line("SMOKE RUN: the second log's full size is \(Format.grouped(Self.fullSecondLogInstalls)) installs")
        }
        out.line(facts.machineLine)
        out.line("revision: \(facts.revision); PostgreSQL \(facts.postgresVersion), shared_buffers \(sharedBuffers)")
        out.line(facts.durability.line(Durability.serverSetsItToo))
        out.line("rate limiter: off on POST /v1/events (UPSHIFT_EVENTS_RATE_LIMIT=0, UPSHIFT_EVENTS_KEY_RATE_LIMIT=0); none on the reports (UPSHIFT_READER_RATE=0, UPSHIFT_READER_CONCURRENCY=10000, UPSHIFT_BACKTEST_CONCURRENCY=64)")
        loadLines(load, into: &out)
        out.line()
        tableRows(into: &out)
        out.line()
        notes(into: &out)
        musts(into: &out)
        return out.finish(
            outputFolder: outputFolder,
            musts: "0 non-2xx, every accepted event stored and counted by every projection, 0 dead letters, durability on")
    }

    /// "bulk load: ..." and the log it made, in two lines (`indent` before each).
    private func loadLines(_ load: BulkLoad, indent: String = "", into out: inout SummaryWriter) {
        // Rates are of the printed seconds, as the bash version computed them.
        let loadSeconds = Format.printed(load.seconds, 1)
        let loadRate = loadSeconds > 0 ? Double(load.events) / loadSeconds : 0
        out.line(indent + "bulk load: \(Format.grouped(load.events)) events in \(Format.fixed(load.seconds, 1)) s (\(Format.grouped(loadRate)) events/s; \(load.transactions) transactions, \(load.jobs) psql at a time), VACUUM ANALYZE \(Format.fixed(load.vacuumSeconds, 1)) s;")
        out.line(indent + "    event_log \(load.logSize) with indexes; \(Format.grouped(load.eventsInLog)) events in the log at the start of the catch-up (catalog included)")
    }

    /// A catch-up against its target, then each projection's.
    private func catchUpRows(_ what: String, _ catchUp: CatchUp, into out: inout SummaryWriter) {
        let table = Self.table
        out.line(table.row([
            what, "\(Format.grouped(catchUp.eventsPerSecond)) events/s, \(Format.fixed(catchUp.seconds, 2)) s",
            Targets.catchUp.text, Verdict.metOrMissed(catchUp.eventsPerSecond, Targets.catchUp),
        ]))
        for projection in catchUp.projections {
            out.line(table.row([
                "  \(projection.name)",
                "\(Format.grouped(projection.eventsPerSecond)) events/s, \(Format.fixed(projection.seconds, 2)) s", "", "",
            ]))
        }
    }

    private func tableRows(into out: inout SummaryWriter) {
        let table = Self.table
        out.line(table.row(["what", "measured", "target", "verdict"]))
        catchUpRows("catch-up, all projections (from launch)", catchUp, into: &out)
        if let second = secondLog {
            catchUpRows("catch-up, second log, by install (from launch)", second.catchUp, into: &out)
        }
        let lag = live.lag
        out.line(table.row([
            "lag at \(Format.fixed(live.run.events.perSecond, 1)) events/s, p50 / p99 / max",
            "\(seconds(lag.p50)) / \(seconds(lag.p99)) / \(seconds(lag.maximum)) s", Targets.lag.text,
            Verdict.metOrMissed(lag.p99, Targets.lag),
        ]))
        for projection in lag.projections {
            out.line(table.row([
                "  \(projection.name)",
                "\(seconds(projection.p50)) / \(seconds(projection.p99)) / \(seconds(projection.maximum)) s", "", "",
            ]))
        }
        for report in reports {
            let target = report.target
            if report.run.answered2xx == 0 {
                // wrk gives up on a request after --timeout 10s: no latency to report, only the first answer.
                out.line(table.row([
                    "report \(report.name), first answer", "\(report.firstSeconds) s (none within wrk's 10 s timeout)",
                    target.text, "MISSED",
                ]))
            } else {
                let what =
                    report.name == "adoption"
                    ? "report adoption (90 days), p50 / p95"
                    : report.paths > 1 ? "report \(report.name) (\(report.paths) paths), p50 / p95" : "report \(report.name), p50 / p95"
                out.line(table.row([
                    what, "\(Format.fixed(report.run.latency.p50, 2)) / \(Format.fixed(report.run.latency.p95, 2)) ms",
                    target.text, Verdict.metOrMissed(report.run.latency.p95, target),
                ]))
            }
        }
        if let rebuild = rebuildUnderLoad {
            let lag = rebuild.lag
            out.line(table.row([
                "lag while \(rebuild.projection) rebuilds, p50 / p99 / max",
                "\(seconds(lag.p50)) / \(seconds(lag.p99)) / \(seconds(lag.maximum)) s", Targets.lag.text,
                Verdict.metOrMissed(lag.p99, Targets.lag),
            ]))
        }
        if let holds = xidHolds {
            func held(_ hold: XidHold?) -> String { hold.map { Format.fixed($0.seconds, 1) } ?? "0" }
            let longest = holds.longest?.seconds ?? 0
            out.line(table.row([
                "transaction id held, catch-up / live\(rebuildUnderLoad == nil ? "" : " / rebuild")",
                "\(held(holds.catchUp)) / \(held(holds.live))\(rebuildUnderLoad == nil ? "" : " / \(held(holds.rebuild))") s (longest)",
                "<= \(Format.fixed(XidHolds.limitSeconds, 0)) s (the default bound)", longest <= XidHolds.limitSeconds ? "met" : "MISSED",
            ]))
        }
        let peak = max(rssPeakMiB ?? 0, server.peakRSSMiB)
        out.line(table.row([
            "RSS of upshift serve, peak (catch-up / live)",
            "\(mib(rssCatchUpMiB)) / \(mib(rssLiveMiB)) MiB (VmHWM \(Format.fixed(server.peakRSSMiB, 0)))",
            Targets.memory.text, Verdict.metOrMissed(peak * 1_048_576 / 1_000_000, Targets.memory),
        ]))
        if let second = secondLog {
            let peak = max(second.rssPeakMiB ?? 0, second.server.peakRSSMiB)
            out.line(table.row([
                "RSS of upshift serve, second catch-up, peak", "\(mib(second.rssPeakMiB)) MiB (VmHWM \(Format.fixed(second.server.peakRSSMiB, 0)))",
                Targets.memory.text, Verdict.metOrMissed(peak * 1_048_576 / 1_000_000, Targets.memory),
            ]))
        }
    }

    private func notes(into out: inout SummaryWriter) {
        let lag = live.lag
        out.line("catch-up: events in the log / seconds from launching upshift serve to the batch that applied the")
        out.line("    last one (projections.updated_at); CPU: all \(cpus) CPUs \(catchUpCPU) busy, upshift serve \(Format.fixed(catchUpServerCPUSeconds, 1)) CPU-s.")
        out.line("lag: every \(lag.periodMilliseconds.map { Format.fixed($0, 0) } ?? "-") ms (asked 200), max over projections of now() - min(recorded_at) after the checkpoint;")
        if let drain = live.drainSeconds {
            out.line("    \(lag.count) samples while wrk ran; all counted \(Format.fixed(drain, 1)) s after wrk stopped. CPU during the live run: \(live.cpu).")
        } else {
            out.line("    \(lag.count) samples while wrk ran; NOT all counted 120 s after wrk stopped. CPU during the live run: \(live.cpu).")
        }
        out.line("live load: wrk -t 2 -c 8, \(liveEventsPerRequest) events/request, \(liveRequestsPerSecond) requests/s paced (delay()), \(lagDurationSeconds) s: \(Format.fixed(live.run.events.perSecond, 1)) events/s accepted;")
        out.line("    POST latency p50 \(Format.fixed(live.run.latency.p50, 2)) ms, p99 \(Format.fixed(live.run.latency.p99, 2)) ms; slots already due when asked (sender behind): \(live.run.lateSlots)")
        if reportsDuringLive {
            out.line("reports: wrk -t 1 -c 1 --latency, \(reportDurationSeconds) s each, during the live run, each going through its paths in")
            out.line("    turn (releases 1.0.0-1.9.0; prompts of all and of each target; minimum impact of each release over")
            out.line("    windows of 1-90 days; the dashboard's release page, signed in, of each release; the backtest of a")
            out.line("    minimum raised to 1.3.0-1.9.0, a release blocked and 1.9.0's rollout at 5, 20, 50 %, over 7, 30 and 90")
            out.line("    days); no answer is cached;")
        } else {
            out.line("reports: wrk -t 1 -c 1 --latency, \(reportDurationSeconds) s each, after the catch-up, before the live run;")
        }
        let perReport = reports.map {
            " \($0.name) \(Format.fixed($0.run.requestsPerSecond, 1)) req/s, \($0.bytes) B (p99 \(Format.fixed($0.run.latency.p99, 2)) ms);"
        }
        out.line("    requests/s and answer bytes:" + perReport.joined())
        out.line("RSS: VmRSS every second (peak over the run \(mib(rssPeakMiB)) MiB); VmHWM at the end of the live run.")
        if let rebuild { rebuildLine(rebuild, how: "", into: &out) }
        if let fold {
            rebuildLine(fold, how: " --in-batches", into: &out)
            if let rebuild, rebuild.failure == nil, fold.failure == nil {
                let target = Self.catchUpTarget
                out.line(
                    "    the fold of live batches against the set-based backfill: \(Format.grouped(fold.eventsPerSecond)) against "
                        + "\(Format.grouped(rebuild.eventsPerSecond)) events/s; the fold is \(fold.eventsPerSecond >= target ? "at or above" : "below") "
                        + "the catch-up target of \(Format.grouped(target)) events/s")
            }
        }
        if let rebuild = rebuildUnderLoad {
            out.line("rebuild under load: upshift projections rebuild \(rebuild.projection), started 5 s into a second live run of \(rebuild.loadSeconds) s")
            out.line("    (\(Format.fixed(rebuild.eventsPerSecond, 1)) events/s accepted, non-2xx \(rebuild.non2xx)): \(Format.fixed(rebuild.seconds, 1)) s, exit status \(rebuild.exitStatus); the lag above is of the")
            out.line("    active generations (the rebuilt projection's current one included) from its start to its end or the load's")
            if rebuild.seconds + 5 > Double(rebuild.loadSeconds) {
                out.line("    the rebuild outlasted the load: its lag is of the load's \(rebuild.loadSeconds - 5) s alone (--rebuild-duration longer to cover it)")
            }
            if rebuild.exitStatus != 0 || rebuild.non2xx != 0 { out.fail() }
        }
        if let erasure = erasureUnderLoad {
            let lag = erasure.lag
            let took = erasure.seconds.map { "\(Format.fixed($0, 1)) s, \(Format.fixed($0 * 1_000 / Double(max(erasure.installs, 1)), 1)) ms an install" } ?? "not done within 30 minutes"
            out.line("erasure under load: \(erasure.installs) installs (\(erasure.events) events) erased with upshift installs forget, 5 s into a live run of \(erasure.loadSeconds) s")
            out.line("    (\(Format.fixed(erasure.eventsPerSecond, 1)) events/s accepted, non-2xx \(erasure.non2xx)): all done in \(took); \(erasure.eventsLeft) of their earlier events left in the log")
            out.line("    lag meanwhile, p50 / p99 / max: \(seconds(lag.p50)) / \(seconds(lag.p99)) / \(seconds(lag.maximum)) s; the events counted below")
            out.line("    include those the erasures removed from the log after the projections had applied them")
            if erasure.seconds == nil || erasure.eventsLeft != 0 || erasure.non2xx != 0 { out.fail() }
        }
        if let holds = xidHolds {
            out.line("transaction ids: sampled every 200 ms (pg_stat_activity.backend_xid); the longest hold of each phase:")
            for (phase, hold) in [("catch-up", holds.catchUp), ("live", holds.live), ("rebuild", holds.rebuild)] {
                guard let hold else { continue }
                out.line("    \(phase): \(Format.fixed(hold.seconds, 1)) s, pid \(hold.pid), last seen in: \(hold.query)")
            }
        }
        out.line("upshift serve: \(server); exit status after SIGTERM: \(server.exitStatus); log lines at warning or above: \(serverLogLines)")
        out.line("adoption spot check (day, installs in the log, in adoption_daily, versions differing): \(spotCheck)")
        if let second = secondLog {
            out.line("second log: app \(second.app), \(Format.grouped(second.installs)) installs with 3-20 events each (about 10) over \(second.days) days, each")
            out.line("    transaction's rows in the order of install, then time (as an import or a backfill writes them); on a")
            out.line("    database of its own, after the first run's server stopped; upshift serve with the same settings.")
            out.line("    types: \(second.types)")
            loadLines(second.load, indent: "    ", into: &out)
            out.line("    catch-up: CPU: all \(cpus) CPUs \(second.cpu) busy, upshift serve \(Format.fixed(second.serverCPUSeconds, 1)) CPU-s.")
            out.line("    upshift serve: \(second.server); exit status after SIGTERM: \(second.server.exitStatus); log lines at warning or above: \(second.serverLogLines)")
            out.line("    adoption spot check of its oldest whole day: \(second.spotCheck)")
        }
        out.line()
    }

    private func musts(into out: inout SummaryWriter) {
        let reportNon2xx = reports.map(\.non2xx).reduce(0, +)
        let non2xx = live.run.non2xx + reportNon2xx
        out.line("non-2xx: \(non2xx) (live POSTs \(live.run.non2xx), reports \(reportNon2xx)); HTTP statuses of the live run: \(live.run.statuses); socket errors: \(live.run.socketErrors.compact)")
        if non2xx != 0 { out.fail() }
        for sample in live.run.samples + reports.flatMap(\.run.samples) { out.line("    " + sample) }
        let run = live.run
        if run.events.notAccepted != 0 {
            out.line("live events: ANOMALY: \(run.events.notAccepted) duplicate or rejected")
            out.fail()
        }
        let extra = live.rowsStored - run.events.accepted
        if extra == 0 {
            out.line("live events: sent \(run.eventsSent), accepted \(run.events.accepted), stored \(live.rowsStored)  OK")
        } else if extra > 0 && extra <= run.inFlight * liveEventsPerRequest {
            out.line("live events: sent \(run.eventsSent), accepted \(run.events.accepted), stored \(live.rowsStored) (+\(extra) of the \(run.inFlight) requests in flight when wrk stopped)  OK")
        } else {
            out.line("live events: MISMATCH: sent \(run.eventsSent), accepted \(run.events.accepted), stored \(live.rowsStored), requests in flight \(run.inFlight)")
            out.fail()
        }
        countedMusts(
            "", counted: counted, finalEvents: finalEvents, drained: live.drainSeconds != nil, deadLetters: deadLetters,
            into: &out)
        if let second = secondLog {
            countedMusts(
                "second log, ", counted: second.counted, finalEvents: second.finalEvents, drained: true,
                deadLetters: second.deadLetters, into: &out)
        }
        out.durability(facts.durability)
    }

    /// Every projection counted every event of a log (`drained`: before the bench gave up waiting), and
    /// none went to the dead letters.
    private func countedMusts(
        _ what: String, counted: [ProjectionProgress], finalEvents: Int, drained: Bool, deadLetters: Int,
        into out: inout SummaryWriter
    ) {
        let uncounted = counted.filter { $0.events != finalEvents }.map { " \($0.name)=\($0.events)" }.joined()
        if drained && uncounted.isEmpty {
            out.line(what + "counted: every projection applied all \(finalEvents) events in the log  OK")
        } else {
            out.line(what + "counted: NOT ALL: \(finalEvents) events in the log, projections:\(uncounted.isEmpty ? " (timed out)" : uncounted)")
            out.fail()
        }
        if deadLetters == 0 {
            out.line(what + "dead letters: 0  OK")
        } else {
            out.line(what + "dead letters: \(deadLetters) (valid synthetic events should all apply; see projection_dead_letters)  FAILED")
            out.fail()
        }
    }

    private func seconds(_ value: Double?) -> String { value.map { Format.fixed($0, 3) } ?? "-" }

    private func mib(_ value: Double?) -> String { value.map { Format.fixed($0, 0) } ?? "-" }
}
