/// `scripts/bench memory`: the server-wide body budget under many slow gzip bodies beside polite clients
/// and checks (docs/BENCHMARKS.md, "Performance targets", memory: RSS ≤ 200 MB), and the bytes of the
/// rate limiters' tables at their capacity.
public struct MemorySummary: Sendable {
    /// The greedy connections and what they got.
    public struct SlowBodies: Sendable, Equatable {
        public var connections: Int
        /// The gzip body each sends, and what it inflates to.
        public var bodyBytes: Int
        public var inflatedBytes: Int
        public var spreadSeconds: Double
        public var attempts: Int
        public var bodiesSent: Int
        /// Answers by status, and connections that ended without one.
        public var answers: [String: Int]
        public var mostHeld: Int

        public init(
            connections: Int, bodyBytes: Int, inflatedBytes: Int, spreadSeconds: Double, attempts: Int, bodiesSent: Int,
            answers: [String: Int], mostHeld: Int
        ) {
            self.connections = connections
            self.bodyBytes = bodyBytes
            self.inflatedBytes = inflatedBytes
            self.spreadSeconds = spreadSeconds
            self.attempts = attempts
            self.bodiesSent = bodiesSent
            self.answers = answers
            self.mostHeld = mostHeld
        }
    }

    /// The polite clients: batches stored, given up, and what the log holds of their installs.
    public struct Polite: Sendable, Equatable {
        public var clients: Int
        public var eventsPerBatch: Int
        public var batchesStored: Int
        public var batchesLost: Int
        public var answers: [Int: Int]
        public var failures: [String: Int]
        public var eventsInLog: Int

        public init(
            clients: Int, eventsPerBatch: Int, batchesStored: Int, batchesLost: Int, answers: [Int: Int],
            failures: [String: Int], eventsInLog: Int
        ) {
            self.clients = clients
            self.eventsPerBatch = eventsPerBatch
            self.batchesStored = batchesStored
            self.batchesLost = batchesLost
            self.answers = answers
            self.failures = failures
            self.eventsInLog = eventsInLog
        }

        /// Every batch stored, each event once, and nothing but refusals on the way.
        var holds: Bool {
            batchesLost == 0 && batchesStored > 0 && failures.isEmpty && eventsInLog == batchesStored * eventsPerBatch
                && answers.keys.allSatisfy { [200, 429, 503].contains($0) }
        }
    }

    /// One rate limiter's table filled with `clients` client addresses of a server of its own.
    public struct LimiterTable: Sendable, Equatable {
        public var name: String
        public var clients: Int
        /// Client addresses wrk named at least once, and its answers by status.
        public var addressesNamed: Int
        public var statuses: String
        /// VmRSS of the server before and after.
        public var rssBeforeMiB: Double
        public var rssAfterMiB: Double

        public init(name: String, clients: Int, addressesNamed: Int, statuses: String, rssBeforeMiB: Double, rssAfterMiB: Double) {
            self.name = name
            self.clients = clients
            self.addressesNamed = addressesNamed
            self.statuses = statuses
            self.rssBeforeMiB = rssBeforeMiB
            self.rssAfterMiB = rssAfterMiB
        }

        public var growthMiB: Double { rssAfterMiB - rssBeforeMiB }
    }

    public var facts: RunFacts
    public var outputFolder: String
    public var seconds: Double
    public var budgetBytes: Int
    public var slow: SlowBodies
    public var polite: Polite
    /// The checks of the run (wrk, paced) and their rate.
    public var checks: ReportRun
    /// `upshift_body_budget_refused_total` and `upshift_rate_limited_total` (every limit) after the run.
    public var budgetRefused: Double
    public var rateLimited: Double
    /// The largest RSS sampled once a second, and the server's VmHWM, exit status and CPU.
    public var sampledPeakMiB: Double
    public var server: ServerUsage
    public var tables: [LimiterTable]
    public var tablesServer: ServerUsage?

    public init(
        facts: RunFacts, outputFolder: String, seconds: Double, budgetBytes: Int, slow: SlowBodies, polite: Polite,
        checks: ReportRun, budgetRefused: Double, rateLimited: Double, sampledPeakMiB: Double, server: ServerUsage,
        tables: [LimiterTable], tablesServer: ServerUsage?
    ) {
        self.facts = facts
        self.outputFolder = outputFolder
        self.seconds = seconds
        self.budgetBytes = budgetBytes
        self.slow = slow
        self.polite = polite
        self.checks = checks
        self.budgetRefused = budgetRefused
        self.rateLimited = rateLimited
        self.sampledPeakMiB = sampledPeakMiB
        self.server = server
        self.tables = tables
        self.tablesServer = tablesServer
    }

    /// Every check must be answered within this (milliseconds).
    public static let checkBoundMilliseconds = 1_000.0

    public func render() -> Summary {
        var out = SummaryWriter()
        out.head(
            "Upshift memory benchmark: \(Format.fixed(seconds, 0)) s of slow bodies, \(facts.started)", facts: facts,
            limiter: "the defaults for events (every client its own address, 127.0.0.1 a trusted proxy); off on the check (one loopback client)")
        out.line("body budget: \(Format.grouped(budgetBytes)) bytes (UPSHIFT_BODY_BUDGET_BYTES, the default)")
        out.line("slow bodies: \(Format.grouped(slow.connections)) connections, each POST /v1/events with a gzip body of \(Format.grouped(slow.bodyBytes)) bytes inflating to \(Format.grouped(slow.inflatedBytes)), sent in 20 parts over \(Format.fixed(slow.spreadSeconds, 0)) s, again after each answer's Retry-After")
        out.line("  \(Format.grouped(slow.attempts)) requests, \(Format.grouped(slow.bodiesSent)) bodies sent whole, at most \(Format.grouped(slow.mostHeld)) awaiting their answer at once; answers \(Self.counts(slow.answers))")
        out.line("polite clients: \(polite.clients), each a batch of \(polite.eventsPerBatch) events a second, sent again after Retry-After until stored")
        out.line()

        let peak = max(sampledPeakMiB, server.peakRSSMiB)
        let memoryMet = Targets.memory.isMet(by: peak * 1_048_576 / 1_000_000)
        out.line("peak RSS of upshift serve: \(Format.fixed(peak, 0)) MiB (VmHWM \(Format.fixed(server.peakRSSMiB, 0)), sampled \(Format.fixed(sampledPeakMiB, 0)); target \(Targets.memory.boundText))  \(Verdict.passOrMiss(memoryMet))")
        if !memoryMet { out.fail() }

        let latency = checks.latency
        let checksMet = checks.non2xx == 0 && checks.socketErrors.isEmpty && checks.answered2xx > 0
            && latency.max <= Self.checkBoundMilliseconds
        out.line("checks: \(Format.grouped(checks.answered2xx)) answered 2xx (\(Format.fixed(checks.requestsPerSecond, 0))/s), p50 \(Format.fixed(latency.p50, 2)) ms, p99 \(Format.fixed(latency.p99, 2)) ms, max \(Format.fixed(latency.max, 2)) ms (bound \(Format.fixed(Self.checkBoundMilliseconds, 0)) ms); statuses \(checks.statuses), socket errors \(checks.socketErrors.compact)  \(Verdict.passOrMiss(checksMet))")
        if !checksMet { out.fail() }

        let politeMet = polite.holds
        out.line("polite clients: \(Format.grouped(polite.batchesStored)) batches stored, \(polite.batchesLost) given up; \(Format.grouped(polite.eventsInLog)) of their events in the log (expected \(Format.grouped(polite.batchesStored * polite.eventsPerBatch))); answers \(Self.counts(Dictionary(uniqueKeysWithValues: polite.answers.map { ("\($0.key)", $0.value) })))\(polite.failures.isEmpty ? "" : "; failures " + Self.counts(polite.failures))  \(Verdict.passOrMiss(politeMet))")
        if !politeMet { out.fail() }

        let refusalsMet = budgetRefused > 0 && rateLimited == 0
        out.line("refusals: upshift_body_budget_refused_total \(Format.fixed(budgetRefused, 0)), upshift_rate_limited_total \(Format.fixed(rateLimited, 0)) (the budget's, not a limiter's)  \(Verdict.passOrMiss(refusalsMet))")
        if !refusalsMet { out.fail() }
        out.line("upshift serve: \(server), exit \(server.exitStatus)")
        if server.exitStatus != 0 { out.fail() }

        if !tables.isEmpty {
            out.line()
            out.line("rate limiters' tables at capacity (a server of their own; each client an IPv6 /64, the longest key):")
            for table in tables {
                let filled = table.addressesNamed >= table.clients
                out.line("  \(table.name): \(Format.grouped(table.addressesNamed)) of \(Format.grouped(table.clients)) client addresses named, RSS \(Format.fixed(table.rssBeforeMiB, 1)) -> \(Format.fixed(table.rssAfterMiB, 1)) MiB (+\(Format.fixed(table.growthMiB, 1))); statuses \(table.statuses)\(filled ? "" : "  NOT FILLED")")
                if !filled || table.statuses.split(separator: ",").contains(where: { $0.hasPrefix("5") }) { out.fail() }
            }
            if let tablesServer {
                out.line("  upshift serve: \(tablesServer), exit \(tablesServer.exitStatus)")
                if tablesServer.exitStatus != 0 { out.fail() }
            }
        }
        out.durability(facts.durability)
        return out.finish(
            outputFolder: outputFolder,
            musts: "peak RSS <= 200 MB, every check 2xx within 1 s, every polite batch stored once, refusals by the budget and no limiter, tables filled without a 5xx, exit 0, durability on")
    }

    /// "503:1200,closed without an answer:3", sorted.
    static func counts(_ counts: [String: Int]) -> String {
        let parts = counts.sorted { $0.key < $1.key }.map { "\($0.key):\($0.value)" }
        return parts.isEmpty ? "none" : parts.joined(separator: ",")
    }
}
