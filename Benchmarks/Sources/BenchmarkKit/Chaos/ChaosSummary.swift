/// `scripts/chaos`: what the run did (its faults, its load) and its proofs, each judged.
public struct ChaosSummary: Sendable {
    /// One fault of the plan as it happened, in seconds from the start of the load.
    public struct FaultRecord: Sendable, Equatable {
        public var fault: ChaosPlan.Fault
        public var planned: Double
        /// When it was done; nil when the run ended before it.
        public var done: Double?
        /// A SIGKILL: when the restarted server answered `/health/ready`. The PostgreSQL restart: when
        /// `pg_ctl` saw the cluster accept connections again.
        public var back: Double?
        /// "pid 4242", "down 1.3 s"
        public var detail: String

        public init(fault: ChaosPlan.Fault, planned: Double, done: Double?, back: Double?, detail: String) {
            self.fault = fault
            self.planned = planned
            self.done = done
            self.back = back
            self.detail = detail
        }
    }

    /// The load as offered and as answered.
    public struct Load: Sendable, Equatable {
        /// Offered: events per second (first attempts) and checks per second.
        public var eventsPerSecond: Double
        public var checksPerSecond: Double
        /// How long it ran, in seconds.
        public var seconds: Double
        /// First attempts: batches of 1 and of 100.
        public var singleBatches: Int
        public var hundredBatches: Int
        /// Resends of batches already sent: while the first attempt was still in flight, after its answer.
        public var resentInFlight: Int
        public var resentAfterAnswer: Int
        /// Batches sent again because an attempt got no `200` (as an SDK keeps its queue).
        public var retries: Int
        /// Requests not sent because the endpoint's in-flight limit was reached (answers came too slowly).
        public var skippedEvents: Int
        public var skippedChecks: Int
        public var eventsInFlightLimit: Int
        public var checksInFlightLimit: Int
        /// The longest the load generator went without offering requests, in seconds: a stall of its own
        /// (a busy machine) rather than of the server.
        public var longestPause: Double
        /// When that pause ended, in seconds from the start of the load.
        public var longestPauseEnded: Double
        /// Events that a retry found stored already (answered `duplicate`): an earlier attempt was
        /// committed and its answer lost, to a SIGKILL or a database that went away after the `COMMIT`.
        public var retriedDuplicates: Int
        public var events: OutcomeCounts
        public var checks: OutcomeCounts

        public init(
            eventsPerSecond: Double, checksPerSecond: Double, seconds: Double, singleBatches: Int, hundredBatches: Int,
            resentInFlight: Int, resentAfterAnswer: Int, retries: Int, skippedEvents: Int, skippedChecks: Int,
            eventsInFlightLimit: Int, checksInFlightLimit: Int, longestPause: Double, longestPauseEnded: Double, retriedDuplicates: Int,
            events: OutcomeCounts, checks: OutcomeCounts
        ) {
            self.eventsPerSecond = eventsPerSecond
            self.checksPerSecond = checksPerSecond
            self.seconds = seconds
            self.singleBatches = singleBatches
            self.hundredBatches = hundredBatches
            self.resentInFlight = resentInFlight
            self.resentAfterAnswer = resentAfterAnswer
            self.retries = retries
            self.skippedEvents = skippedEvents
            self.skippedChecks = skippedChecks
            self.eventsInFlightLimit = eventsInFlightLimit
            self.checksInFlightLimit = checksInFlightLimit
            self.longestPause = longestPause
            self.longestPauseEnded = longestPauseEnded
            self.retriedDuplicates = retriedDuplicates
            self.events = events
            self.checks = checks
        }
    }

    public var facts: RunFacts
    public var seed: UInt64
    public var plannedSeconds: Double
    /// The recovery after the PostgreSQL restart must take at most this long (the run fails otherwise).
    public var recoveryBound: Double
    public var outputFolder: String
    public var faults: [FaultRecord]
    public var load: Load
    public var exactlyOnce: ExactlyOnce
    /// nil when PostgreSQL was never restarted.
    public var outage: OutageVerdict?
    /// Seconds; nil when ingestion had not recovered before the next fault or the end of the load.
    public var recovery: Double?
    public var projections: ProjectionComparison
    /// Exits of `upshift serve` that no SIGKILL of the run caused ("exit 1 at 32.4 s").
    public var unexpectedExits: [String]
    /// How the last server exited after SIGTERM at the end (0 expected).
    public var finalExitStatus: Int32

    /// The 5 s recovery target (docs/OPERATIONS.md, "`scripts/chaos`"): printed beside the bound, judged by
    /// the bound.
    public static let recoveryTarget = 5.0

    public init(
        facts: RunFacts, seed: UInt64, plannedSeconds: Double, recoveryBound: Double, outputFolder: String,
        faults: [FaultRecord], load: Load, exactlyOnce: ExactlyOnce, outage: OutageVerdict?, recovery: Double?,
        projections: ProjectionComparison, unexpectedExits: [String], finalExitStatus: Int32
    ) {
        self.facts = facts
        self.seed = seed
        self.plannedSeconds = plannedSeconds
        self.recoveryBound = recoveryBound
        self.outputFolder = outputFolder
        self.faults = faults
        self.load = load
        self.exactlyOnce = exactlyOnce
        self.outage = outage
        self.recovery = recovery
        self.projections = projections
        self.unexpectedExits = unexpectedExits
        self.finalExitStatus = finalExitStatus
    }

    /// Answers of either endpoint that no fault explains: a 5xx other than 503, a 429 or 503 without
    /// `Retry-After`.
    static func forbidden(_ counts: OutcomeCounts) -> [String] {
        counts.counts.keys.filter { outcome in
            guard let status = Int(outcome.prefix(3)) else { return false }
            return (status >= 500 && status != 503) || outcome.hasSuffix("without Retry-After")
        }.sorted()
    }

    public func render() -> Summary {
        var out = SummaryWriter()
        func judge(_ holds: Bool) -> String {
            if !holds { out.fail() }
            return Verdict.passOrMiss(holds)
        }
        out.head(
            "Upshift chaos run: seed \(seed) (scripts/chaos --seed \(seed) replays its plan), \(Format.fixed(plannedSeconds, 0)) s planned, \(facts.started)",
            facts: facts, postgres: " (a cluster of its own)",
            limiter: "off (UPSHIFT_CHECK_RATE_LIMIT=0, UPSHIFT_EVENTS_RATE_LIMIT=0, UPSHIFT_EVENTS_KEY_RATE_LIMIT=0: one loopback client)")

        out.line("faults (seconds from the start of the load)")
        let table = TextTable([.right(8), .right(8), .left(34), .left(0)])
        out.line(table.row(["planned", "done", "fault", "outcome"]))
        for record in faults {
            let done = record.done.map { Format.fixed($0, 1) } ?? "never"
            var outcome = record.detail
            if let doneAt = record.done, let back = record.back {
                let what =
                    switch record.fault {
                    case .killServer: "ready again"
                    case .restartPostgres: "accepting connections again"
                    case .partitionServer: "packets flowing again"
                    }
                outcome += (outcome.isEmpty ? "" : "; ") + "\(what) after \(Format.fixed(back - doneAt, 1)) s"
            }
            out.line(table.row([Format.fixed(record.planned, 1), done, record.fault.rawValue, outcome]))
        }
        let kills = faults.filter { $0.fault == .killServer && $0.done != nil }.count
        let restarts = faults.filter { $0.fault == .restartPostgres && $0.done != nil }.count
        let partitions = faults.filter { $0.fault == .partitionServer && $0.done != nil }.count
        out.line(
            "done: \(kills) of \(ChaosPlan.serverKills) SIGKILLs, each followed by a restart; \(restarts) of \(ChaosPlan.postgresRestarts) PostgreSQL restart and \(partitions) of \(ChaosPlan.partitions) partition of \(Format.fixed(ChaosPlan.partitionSeconds, 0)) s, while the server ran  "
                + judge(kills == ChaosPlan.serverKills && restarts == ChaosPlan.postgresRestarts && partitions == ChaosPlan.partitions))
        out.line(
            "upshift serve exits no SIGKILL caused: \(unexpectedExits.isEmpty ? "none" : unexpectedExits.joined(separator: "; ")); exit \(finalExitStatus) after SIGTERM at the end  "
                + judge(unexpectedExits.isEmpty && finalExitStatus == 0))
        out.line()

        out.line("load (\(Format.fixed(load.seconds, 1)) s)")
        out.line(
            "offered: \(Format.fixed(load.eventsPerSecond, 0)) events/s (half in batches of 1, half in batches of 100) and \(Format.fixed(load.checksPerSecond, 0)) checks/s with install ids; up to \(load.eventsInFlightLimit) event and \(load.checksInFlightLimit) check requests in flight, each on a connection of its own")
        out.line(
            "batches: \(Format.grouped(load.singleBatches)) of 1, \(Format.grouped(load.hundredBatches)) of 100; resent: \(Format.grouped(load.resentInFlight)) while the first attempt was in flight, \(Format.grouped(load.resentAfterAnswer)) after its answer; retried after no 200: \(Format.grouped(load.retries))")
        out.line(
            "not sent, the in-flight limit reached: \(Format.grouped(load.skippedEvents)) event requests, \(Format.grouped(load.skippedChecks)) checks; the load's longest pause: \(Format.fixed(load.longestPause, 2)) s (ending at \(Format.fixed(load.longestPauseEnded, 1)) s)")
        let seconds = max(load.seconds, 0.001)
        out.line(
            "achieved (2xx only): \(Format.fixed(Double(exactlyOnce.acknowledged) / seconds, 1)) events acknowledged/s, \(Format.fixed(Double(load.events.successes) / seconds, 1)) event requests/s, \(Format.fixed(Double(load.checks.successes) / seconds, 1)) checks/s")
        out.line("POST /v1/events answers: \(load.events)")
        out.line("GET check answers: \(load.checks)")
        let forbidden = Self.forbidden(load.events) + Self.forbidden(load.checks)
        out.line(
            "never a 5xx but 503, never a 429 or 503 without Retry-After: \(forbidden.isEmpty ? "none seen" : forbidden.joined(separator: ", "))  "
                + judge(forbidden.isEmpty && load.events.successes > 0 && load.checks.successes > 0))
        out.line()

        out.line("exactly once (event_log by event id, checked events aside)")
        let once = exactlyOnce
        out.line(
            "acknowledged with 200: \(Format.grouped(once.acknowledged)); stored exactly once: \(Format.grouped(once.storedOnce)); missing: \(Format.grouped(once.missing.count)); stored more than once: \(Format.grouped(once.storedMoreThanOnce.count)); stored, never sent: \(Format.grouped(once.neverSent.count)); rejected: \(once.rejected.total == 0 ? "0" : once.rejected.description)  "
                + judge(once.holds))
        out.line(
            "sent: \(Format.grouped(once.sent)); never acknowledged: \(Format.grouped(once.sentUnacknowledged)), of which stored once: \(Format.grouped(once.storedUnacknowledged)); found stored by a retry (an answer lost after the COMMIT): \(Format.grouped(load.retriedDuplicates))")
        for id in (once.missing + once.storedMoreThanOnce + once.neverSent).prefix(5) { out.line("  e.g. \(id.uuidString.lowercased())") }
        out.line()

        if let outage {
            out.line("while PostgreSQL was down (\(Format.fixed(outage.up - outage.down, 1)) s, from \(Format.fixed(outage.down, 1)) s; the server ran on)")
            out.line("checks: \(outage.checks)  " + judge(outage.checksHold))
            let raced = outage.lastEventsSuccess.map { " (the last 200 \(Format.fixed($0, 2)) s after the stop began)" } ?? ""
            out.line("POST /v1/events: \(outage.events)\(raced)  " + judge(outage.eventsHold))
            let bound = "target \(Format.fixed(Self.recoveryTarget, 0)) s, bound \(Format.fixed(recoveryBound, 0)) s"
            if let recovery {
                out.line(
                    "ingestion recovered \(Format.fixed(recovery, 2)) s after PostgreSQL accepted connections again, without a server restart (\(bound))  "
                        + judge(recovery <= recoveryBound))
            } else {
                out.line("ingestion did not recover before the next fault or the end of the load (\(bound))  " + judge(false))
            }
        } else {
            out.line("PostgreSQL was never restarted: no outage to judge  " + judge(false))
        }
        out.line()

        out.line("projections against a fresh rebuild (upshift projections rebuild), table for table")
        let rows = TextTable([.left(32), .right(12), .right(12), .left(0)])
        out.line(rows.row(["table", "incremental", "rebuilt", "rows"]))
        for table in projections.tables {
            out.line(rows.row([
                table.name, Format.grouped(table.incrementalRows), Format.grouped(table.rebuiltRows),
                table.isEqual ? "equal" : "DIFFERENT",
            ]))
            for example in table.examples { out.line("  " + String(example.prefix(300))) }
        }
        out.line("every projection equals its rebuild  " + judge(projections.holds))
        out.durability(facts.durability)
        return out.finish(
            outputFolder: outputFolder,
            musts: "3 SIGKILLs, 1 PostgreSQL restart and 1 partition, exactly once, checks 200 and events 503 with Retry-After while PostgreSQL was down, recovery within \(Format.fixed(recoveryBound, 0)) s, projections equal a rebuild, durability on")
    }
}

extension OutcomeCounts {
    /// Exchanges answered 2xx.
    public var successes: Int {
        counts.filter { outcome, _ in Int(outcome).map { (200..<300).contains($0) } ?? false }.values.reduce(0, +)
    }
}
