/// `scripts/bench check`: GET /v1/apps/{app}/check against nginx and a trivial Hummingbird route serving
/// the same bytes, then a memory case (docs/BENCHMARKS.md, "Performance targets": check endpoint and
/// memory).
public struct CheckSummary: Sendable {
    /// One wrk run and how busy the CPUs were during it.
    public struct Measured: Sendable, Equatable {
        public var run: CheckRun
        public var cpu: String
        /// The gap each connection waits after an answer, in ms, for a paced run ("3.226").
        public var pace: String?

        public init(run: CheckRun, cpu: String, pace: String? = nil) {
            self.run = run
            self.cpu = cpu
            self.pace = pace
        }
    }

    /// What `upshift serve` of a case said about itself.
    public struct Server: Sendable, Equatable {
        public var metrics: PrometheusText
        public var usage: ServerUsage
        /// Lines it logged at warning or above.
        public var logLines: Int

        public init(metrics: PrometheusText, usage: ServerUsage, logLines: Int) {
            self.metrics = metrics
            self.usage = usage
            self.logLines = logLines
        }

        var observed: String { metrics.printed("upshift_check_observations_total") }
        var dropped: String { metrics.printed("upshift_check_observations_dropped_total") }
    }

    /// The answer cases (a) and (b) serve.
    public struct Body: Sendable, Equatable {
        public var file: String
        public var bytes: Int
        /// "soft, update_available": its action and reason.
        public var decision: String
        public var path: String
        public var query: String

        public init(file: String, bytes: Int, decision: String, path: String, query: String) {
            self.file = file
            self.bytes = bytes
            self.decision = decision
            self.path = path
            self.query = query
        }
    }

    public var facts: RunFacts
    /// "nginx/1.22.1"
    public var nginxVersion: String
    public var durationSeconds: Int
    public var connections: Int
    public var cpus: Int
    public var outputFolder: String
    public var body: Body
    /// (a) nginx, static file.
    public var nginx: Measured
    /// (b) `upshift bench-static`, then paced at half its rate.
    public var trivialRoute: Measured
    public var trivialRoutePaced: Measured
    /// (c) the check without install, then paced.
    public var check: Measured
    public var checkPaced: Measured
    public var checkServer: Server
    /// (d) a distinct install per request, and the `checked` rows and distinct installs stored.
    public var checkWithInstall: Measured
    public var checkWithInstallServer: Server
    public var checkedRows: Int
    public var checkedInstalls: Int
    /// (e) junk and distinct questions, and the server's peak RSS (VmHWM) in MiB.
    public var memory: Measured
    public var memoryServer: Server
    public var memoryPeakRSSMiB: Double
    /// The roles `upshift serve` ran with in (c), (d) and (e), as the summary states them; nil in runs
    /// from before, when they ran with both roles.
    public var roles: String?

    public init(
        facts: RunFacts, nginxVersion: String, durationSeconds: Int, connections: Int, cpus: Int,
        outputFolder: String, body: Body, nginx: Measured, trivialRoute: Measured, trivialRoutePaced: Measured,
        check: Measured, checkPaced: Measured, checkServer: Server, checkWithInstall: Measured,
        checkWithInstallServer: Server, checkedRows: Int, checkedInstalls: Int, memory: Measured,
        memoryServer: Server, memoryPeakRSSMiB: Double
    ) {
        self.facts = facts
        self.nginxVersion = nginxVersion
        self.durationSeconds = durationSeconds
        self.connections = connections
        self.cpus = cpus
        self.outputFolder = outputFolder
        self.body = body
        self.nginx = nginx
        self.trivialRoute = trivialRoute
        self.trivialRoutePaced = trivialRoutePaced
        self.check = check
        self.checkPaced = checkPaced
        self.checkServer = checkServer
        self.checkWithInstall = checkWithInstall
        self.checkWithInstallServer = checkWithInstallServer
        self.checkedRows = checkedRows
        self.checkedInstalls = checkedInstalls
        self.memory = memory
        self.memoryServer = memoryServer
        self.memoryPeakRSSMiB = memoryPeakRSSMiB
    }

    /// Figures of runs shorter than this do not count.
    public static let shortestCountingDuration = 10

    /// The gap per connection, in ms, that paces a run at half of `maxRequestsPerSecond` over
    /// `connections` connections, as wrk's `delay()` takes it ("%.3f").
    public static func pace(connections: Int, maxRequestsPerSecond: Double) -> String {
        Format.fixed(Double(connections) * 1000 / (maxRequestsPerSecond / 2), 3)
    }

    public var checkAgainstTrivialRoute: Ratio {
        Ratio(check.run.requestsPerSecond, over: trivialRoute.run.requestsPerSecond, target: Targets.checkAgainstTrivialRoute)
    }

    public var checkAgainstNginx: Ratio {
        Ratio(check.run.requestsPerSecond, over: nginx.run.requestsPerSecond, target: Targets.checkAgainstNginx)
    }

    public var checkWithInstallAgainstTrivialRoute: Ratio {
        Ratio(
            checkWithInstall.run.requestsPerSecond, over: trivialRoute.run.requestsPerSecond,
            target: Targets.checkWithInstallAgainstTrivialRoute)
    }

    static let table = TextTable([
        .left(44), .right(9), .right(7), .right(7), .right(9), .right(7), .right(7), .right(8), .right(6), .right(4),
    ])

    public func render() -> Summary {
        var out = SummaryWriter()
        out.line("Upshift check benchmark: \(durationSeconds) s per case, \(facts.started)")
        if durationSeconds < Self.shortestCountingDuration {
            out.line("SMOKE RUN: under \(Self.shortestCountingDuration) s per case, these figures do not count")
        }
        out.line(facts.machineLine)
        out.line("revision: \(facts.revision); PostgreSQL \(facts.postgresVersion); \(nginxVersion)")
        out.line(facts.durability.line(Durability.serverSetsItToo))
        out.line("rate limiter: off for (c) and (d) (UPSHIFT_CHECK_RATE_LIMIT=0); none in nginx and bench-static")
        if let roles { out.line("roles of upshift serve: \(roles)") }
        out.line("load: wrk -t 2 -c \(connections) --latency, \(durationSeconds) s; paced: delay() = \(connections) connections / (half the max req/s of the case)")
        out.line("body of (a) and (b): .bench/\(body.file), \(body.bytes) bytes, the answer of upshift serve to")
        out.line("    GET \(body.path)?\(body.query) (\(body.decision))")
        out.line()
        let table = Self.table
        out.line(table.row(["", "max rate", "", "", "paced", "", "", "", "", ""]))
        out.line(table.row(["case", "req/s", "p50 ms", "p99 ms", "req/s", "p50 ms", "p99 ms", "non-2xx", "B/ans", "CPU"]))
        out.line(row("(a) nginx, static file", nginx, paced: nil))
        out.line(row("(b) upshift bench-static (trivial route)", trivialRoute, paced: trivialRoutePaced))
        out.line(row("(c) upshift serve, check, no install", check, paced: checkPaced))
        out.line(row("(d) upshift serve, check, distinct install", checkWithInstall, paced: nil))
        out.line(row("(e) memory: junk and distinct questions", memory, paced: nil))
        out.line("req/s: 2xx answers/s; B/ans: bytes per answer, headers included; CPU: how busy all \(cpus) CPUs were")
        out.line("during the max-rate run (load generator included); non-2xx: max-rate and paced runs together.")
        out.line("(c) and (d) vary version (3 older installs and the 20 releases), OS 15.0-18.3 and locale per request.")
        out.line("(e): app bench-notes (10 releases, 50 lines of 1,000 characters per locale); every other request")
        out.line("    carries a distinct 15 KB ignored parameter, the others distinct (version, OS, locale, previous).")
        out.line("paced gap per connection: (b) \(trivialRoutePaced.pace ?? "-") ms, (c) \(checkPaced.pace ?? "-") ms (after each answer, so a little under half the rate)")
        out.line()
        out.line("(c)/(b) req/s = \(checkAgainstTrivialRoute)  (target \(Targets.checkAgainstTrivialRoute.boundText))")
        out.line("(c)/(a) req/s = \(checkAgainstNginx)  (target \(Targets.checkAgainstNginx.boundText))")
        out.line("(d)/(b) req/s = \(checkWithInstallAgainstTrivialRoute)  (target \(Targets.checkWithInstallAgainstTrivialRoute.boundText))")
        let latency = Targets.checkPacedLatency
        let pacedP99 = checkPaced.run.latency.p99
        out.line("(c) paced p99 = \(Format.fixed(pacedP99, 2)) ms \(Verdict.passOrMiss(latency.isMet(by: pacedP99)))  (target \(latency.boundText) at half the max rate)")
        let memoryMet = Targets.memory.isMet(by: memoryPeakRSSMiB * 1_048_576 / 1_000_000)
        out.line("(e) peak RSS = \(Format.fixed(memoryPeakRSSMiB, 0)) MiB \(Verdict.passOrMiss(memoryMet))  (target \(Targets.memory.boundText)); check-answer cache \(memoryServer.metrics.printed("upshift_check_cache_bytes")) bytes (budget 67108864)")
        out.line()
        integrity(into: &out)
        out.line("(c) observations queued: \(checkServer.observed), dropped: \(checkServer.dropped) (no install: nothing is recorded)")
        out.line("HTTP statuses: (a) \(nginx.run.statuses); (b) \(trivialRoute.run.statuses), paced \(trivialRoutePaced.run.statuses); (c) \(check.run.statuses), paced \(checkPaced.run.statuses); (d) \(checkWithInstall.run.statuses); (e) \(memory.run.statuses)")
        out.line("socket errors (connect, read, write, timeout): (a) \(nginx.run.socketErrors.compact); (b) \(trivialRoute.run.socketErrors.compact), paced \(trivialRoutePaced.run.socketErrors.compact); (c) \(check.run.socketErrors.compact), paced \(checkPaced.run.socketErrors.compact); (d) \(checkWithInstall.run.socketErrors.compact)")
        out.line("max latency: (a) \(ms(nginx)); (b) \(ms(trivialRoute)), paced \(ms(trivialRoutePaced)); (c) \(ms(check)), paced \(ms(checkPaced)); (d) \(ms(checkWithInstall))")
        out.line("upshift serve: (c) \(checkServer.usage), exit \(checkServer.usage.exitStatus) after SIGTERM; (d) \(checkWithInstallServer.usage), exit \(checkWithInstallServer.usage.exitStatus); (e) \(memoryServer.usage), exit \(memoryServer.usage.exitStatus)")
        out.line("server log lines at warning or above: (c) \(checkServer.logLines); (d) \(checkWithInstallServer.logLines); (e) \(memoryServer.logLines)")
        let runs = [
            ("a", nginx), ("b", trivialRoute), ("b-paced", trivialRoutePaced), ("c", check), ("c-paced", checkPaced),
            ("d", checkWithInstall), ("e", memory),
        ]
        for (tag, measured) in runs where !measured.run.samples.isEmpty {
            out.line("NON-2XX in (\(tag)), first ones:")
            for sample in measured.run.samples { out.line("      " + sample) }
        }
        if runs.contains(where: { $0.1.run.non2xx != 0 }) { out.fail() }
        out.durability(facts.durability)
        return out.finish(
            outputFolder: outputFolder,
            musts: "0 non-2xx, every answered check of (d) stored once, 0 dropped, durability on")
    }

    private func row(_ name: String, _ measured: Measured, paced: Measured?) -> String {
        let run = measured.run
        return Self.table.row([
            name, Format.fixed(run.requestsPerSecond, 1), Format.fixed(run.latency.p50, 2),
            Format.fixed(run.latency.p99, 2), paced.map { Format.fixed($0.run.requestsPerSecond, 1) } ?? "-",
            paced.map { Format.fixed($0.run.latency.p50, 2) } ?? "-", paced.map { Format.fixed($0.run.latency.p99, 2) } ?? "-",
            "\(run.non2xx + (paced?.run.non2xx ?? 0))", "\(run.bytesPerAnswer)", measured.cpu,
        ])
    }

    private func ms(_ measured: Measured) -> String { Format.fixed(measured.run.latency.max, 2) + " ms" }

    /// Case (d): every answered check stored once, none dropped.
    private func integrity(into out: inout SummaryWriter) {
        let answered = checkWithInstall.run.answered2xx
        let inFlight = checkWithInstall.run.inFlight
        let extra = checkedRows - answered
        if checkedRows != checkedInstalls {
            out.line("(d) ANOMALY: \(checkedRows) checked rows but \(checkedInstalls) distinct installs (a request stored twice)")
            out.fail()
        }
        if extra == 0 {
            out.line("(d) checked rows stored \(checkedRows) = 2xx answers \(answered)  OK")
        } else if extra > 0 && extra <= inFlight {
            out.line("(d) checked rows stored \(checkedRows) = 2xx answers \(answered) + \(extra) of the \(inFlight) requests in flight at wrk's deadline")
            out.line("    (wrk does not count them; the server still answers and stores them)  OK")
        } else {
            out.line("(d) MISMATCH: checked rows stored \(checkedRows), 2xx answers \(answered), requests in flight at wrk's deadline \(inFlight)")
            out.fail()
        }
        let server = checkWithInstallServer
        if server.dropped == "0" {
            out.line("(d) observations dropped: 0 (upshift_check_observations_dropped_total before SIGTERM; queued: \(server.observed))  OK")
        } else {
            out.line("(d) observations dropped: \(server.dropped) (upshift_check_observations_dropped_total before SIGTERM; queued: \(server.observed))  FAILED")
            out.fail()
        }
    }
}
