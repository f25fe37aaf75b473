/// `scripts/bench ingest`: POST /v1/events against raw PostgreSQL inserts into the same table, four
/// cases side by side (docs/BENCHMARKS.md, "Performance targets": the ingestion rows), and case (b)
/// again beside a report load.
public struct IngestSummary: Sendable {
    /// Case (a) or (c): pgbench inserting into event_log.
    public struct PgbenchCase: Sendable, Equatable {
        public var result: PgbenchResult
        public var rowsStored: Int
        /// How busy all CPUs were, "87%".
        public var cpu: String
        /// The clients of this run, and the rows stored per second of every client count tried for the
        /// reference at its best (empty in older recorded runs, which tried one).
        public var clients: Int
        public var tried: [Int: Double]

        public init(result: PgbenchResult, rowsStored: Int, cpu: String, clients: Int = 0, tried: [Int: Double] = [:]) {
            self.result = result
            self.rowsStored = rowsStored
            self.cpu = cpu
            self.clients = clients
            self.tried = tried
        }

        /// "4: 55,053; 16: 61,002; 64: 58,117" (rows/s per client count), or nil when one was tried.
        var triedText: String? {
            guard tried.count > 1 else { return nil }
            return tried.keys.sorted().map { "\($0): \(Format.grouped(tried[$0]!))" }.joined(separator: "; ")
        }
    }

    /// Case (b) or (d): wrk posting events to `upshift serve`, and what the database holds after it.
    public struct HTTPCase: Sendable, Equatable {
        public var run: EventsRun
        public var cpu: String
        public var server: ServerUsage
        public var rowsStored: Int
        /// Stored rows whose request got no 2xx answer (wrk stopped before it, or it was not 2xx).
        public var rowsOfUnansweredRequests: Int
        /// Requests with some but not all of their events stored.
        public var partialRequests: Int

        public init(
            run: EventsRun, cpu: String, server: ServerUsage, rowsStored: Int, rowsOfUnansweredRequests: Int,
            partialRequests: Int
        ) {
            self.run = run
            self.cpu = cpu
            self.server = server
            self.rowsStored = rowsStored
            self.rowsOfUnansweredRequests = rowsOfUnansweredRequests
            self.partialRequests = partialRequests
        }
    }

    /// Reports asked for again and again on their own connections while case (e) ingests: a read-token
    /// holder keeping every connection of the reads pool busy.
    public struct ReportLoad: Sendable, Equatable {
        /// The report's path and query.
        public var path: String
        public var connections: Int
        /// The server's reads pool (UPSHIFT_READ_POOL_CONNECTIONS): how many of them PostgreSQL runs at once.
        public var readsPool: Int
        public var run: ReportRun
        /// Backtests (`POST …/preview`) of the same token on connections of their own, when the load ran
        /// at the readers' default shares; nil in older recorded runs.
        public var backtests: Backtests?

        public struct Backtests: Sendable, Equatable {
            public var path: String
            public var connections: Int
            public var run: ReportRun

            public init(path: String, connections: Int, run: ReportRun) {
                self.path = path
                self.connections = connections
                self.run = run
            }
        }

        public init(path: String, connections: Int, readsPool: Int, run: ReportRun, backtests: Backtests? = nil) {
            self.path = path
            self.connections = connections
            self.readsPool = readsPool
            self.run = run
            self.backtests = backtests
        }

        /// Statuses other than 2xx and `503` (a report refused within its deadline is the bound at work),
        /// and `429` when the token's share applied (its refusals are the share at work).
        var unexpectedStatuses: [String] {
            (run.statuses.split(separator: ",") + (backtests?.run.statuses.split(separator: ",") ?? [])).map(String.init)
                .filter {
                    !$0.hasPrefix("2") && !$0.hasPrefix("503:") && $0 != "none" && !(backtests != nil && $0.hasPrefix("429:"))
                }
        }

        /// How many answers of `run` had `status`.
        static func count(_ status: Int, in run: ReportRun) -> Int {
            run.statuses.split(separator: ",").compactMap { pair -> Int? in
                let parts = pair.split(separator: ":")
                guard parts.count == 2, Int(parts[0]) == status else { return nil }
                return Int(parts[1])
            }.reduce(0, +)
        }
    }

    /// Case (e): case (b) while ``ReportLoad`` runs, in the same run as (b) so that the two compare.
    public struct UnderReportLoad: Sendable, Equatable {
        public var ingest: HTTPCase
        public var reports: ReportLoad
        /// Ingestion alone with (e)'s roles (`http,projections`), the readers' reference; nil in runs from
        /// before it, which compared (e) with (b).
        public var alone: HTTPCase?

        public init(ingest: HTTPCase, reports: ReportLoad, alone: HTTPCase? = nil) {
            self.ingest = ingest
            self.reports = reports
            self.alone = alone
        }
    }

    public var facts: RunFacts
    public var durationSeconds: Int
    public var cpus: Int
    public var outputFolder: String
    /// (a) 100-row unnest INSERT per transaction, 4 clients.
    public var batchReference: PgbenchCase
    /// (b) 100 events per request, 16 connections.
    public var batch: HTTPCase
    /// (c) 1-row INSERT per transaction, 16 clients.
    public var singleReference: PgbenchCase
    /// (d) 1 event per request, 64 connections.
    public var single: HTTPCase
    /// (e) as (b), beside a report load; nil in older recorded runs.
    public var underReportLoad: UnderReportLoad?
    /// The roles `upshift serve` ran with, as the summary states them; nil in older recorded runs,
    /// when every case ran with both roles.
    public var roles: String?

    public init(
        facts: RunFacts, durationSeconds: Int, cpus: Int, outputFolder: String, batchReference: PgbenchCase,
        batch: HTTPCase, singleReference: PgbenchCase, single: HTTPCase, underReportLoad: UnderReportLoad? = nil
    ) {
        self.facts = facts
        self.durationSeconds = durationSeconds
        self.cpus = cpus
        self.outputFolder = outputFolder
        self.batchReference = batchReference
        self.batch = batch
        self.singleReference = singleReference
        self.single = single
        self.underReportLoad = underReportLoad
    }

    /// Rows stored per second of a pgbench case, as the table prints it (one decimal): the ratios are of
    /// the printed figures, so that a reader can redo them from the table.
    func rowsPerSecond(_ reference: PgbenchCase) -> Double {
        Format.printed(Double(reference.rowsStored) / Double(durationSeconds), 1)
    }

    public var batchRatio: Ratio {
        Ratio(batch.run.events.perSecond, over: rowsPerSecond(batchReference), target: Targets.ingestBatchAgainstUnnest)
    }

    public var singleRatio: Ratio {
        Ratio(single.run.events.perSecond, over: rowsPerSecond(singleReference), target: Targets.ingestSingleAgainstPgbench)
    }

    static let table = TextTable([.left(49), .right(10), .right(10), .right(8), .right(8), .right(8), .right(5)])

    public func render() -> Summary {
        var out = SummaryWriter()
        out.line("Upshift ingest benchmark: \(durationSeconds) s per case, \(facts.started)")
        out.line(facts.machineLine)
        out.line("revision: \(facts.revision); PostgreSQL \(facts.postgresVersion)")
        out.line(facts.durability.line("upshift serve and pgbench also set synchronous_commit=on per connection"))
        out.line("rate limiter: off on POST /v1/events (UPSHIFT_EVENTS_RATE_LIMIT=0, UPSHIFT_EVENTS_KEY_RATE_LIMIT=0: one loopback client)")
        if let roles { out.line("roles of upshift serve: \(roles)") }
        out.line()
        let table = Self.table
        out.line(table.row(["case", "rows/s", "req,tx/s", "p50 ms", "p99 ms", "non-2xx", "CPU"]))
        out.line(pgbenchRow("(a) pgbench, 100-row unnest INSERT/tx, \(batchReference.clients == 0 ? 4 : batchReference.clients) clients", batchReference))
        out.line(httpRow("(b) POST /v1/events, 100 events/req, 16 conns", batch))
        out.line(pgbenchRow("(c) pgbench, 1-row INSERT/tx, \(singleReference.clients == 0 ? 16 : singleReference.clients) clients", singleReference))
        out.line(httpRow("(d) POST /v1/events, 1 event/req, 64 conns", single))
        if let alone = underReportLoad?.alone {
            out.line(httpRow("(e0) as (b), http,projections, no readers", alone))
        }
        if let loaded = underReportLoad {
            let beside =
                loaded.reports.backtests.map { "\(loaded.reports.connections)+\($0.connections) conns of one reader" }
                ?? "\(loaded.reports.connections) conns asking a report"
            out.line(httpRow("(e) as (b), beside \(beside)", loaded.ingest))
        }
        out.line("rows/s: rows stored / duration (pgbench), events acknowledged / duration (HTTP); req,tx/s: 2xx")
        out.line("answers/s or pgbench tps; CPU: how busy all \(cpus) CPUs were during the case (load generator included)")
        if let a = batchReference.triedText, let c = singleReference.triedText {
            out.line("references at their best, rows/s by pgbench clients: (a) \(a); (c) \(c)")
        }
        out.line()
        out.line("(b)/(a) rows/s = \(batchRatio)  (target \(Targets.ingestBatchAgainstUnnest.boundText))")
        out.line("(d)/(c) rows/s = \(singleRatio)  (target \(Targets.ingestSingleAgainstPgbench.boundText))")
        if let loaded = underReportLoad { reportLoad(loaded, into: &out) }
        out.line()
        integrity("b", batch, into: &out)
        integrity("d", single, into: &out)
        if let alone = underReportLoad?.alone { integrity("e0", alone, into: &out) }
        if let loaded = underReportLoad { integrity("e", loaded.ingest, into: &out) }
        out.line("HTTP statuses: (b) \(batch.run.statuses); (d) \(single.run.statuses)\(underReportLoad.map { "; (e) \($0.ingest.run.statuses)" } ?? ""). Socket errors: (b) \(batch.run.socketErrors); (d) \(single.run.socketErrors)\(underReportLoad.map { "; (e) \($0.ingest.run.socketErrors)" } ?? "")")
        out.line("upshift serve: (b) \(batch.server), exit \(batch.server.exitStatus) after SIGTERM; (d) \(single.server), exit \(single.server.exitStatus)\(underReportLoad.map { "; (e) \($0.ingest.server), exit \($0.ingest.server.exitStatus)" } ?? "")")
        out.line("pgbench failed transactions: (a) \(batchReference.result.failedTransactions); (c) \(singleReference.result.failedTransactions)")
        out.durability(facts.durability)
        if batchReference.result.failedTransactions != 0 || singleReference.result.failedTransactions != 0 { out.fail() }
        return out.finish(
            outputFolder: outputFolder,
            musts: "0 non-2xx, every acknowledged event stored once, durability on"
                + (underReportLoad == nil ? "" : "; the reports beside (e) answered 2xx or 503, none timed out"))
    }

    /// (e) against (b), and what the report load got: its answers must be 2xx, or `503` within the bound.
    private func reportLoad(_ loaded: UnderReportLoad, into out: inout SummaryWriter) {
        let reports = loaded.reports
        let run = reports.run
        if let backtests = reports.backtests {
            let reference = loaded.alone ?? batch
            let ratio = Ratio(loaded.ingest.run.events.perSecond, over: reference.run.events.perSecond, target: Targets.ingestionBesideReaders)
            out.line("(e)/(\(loaded.alone == nil ? "b" : "e0")) rows/s = \(ratio)  (target \(Targets.ingestionBesideReaders.boundText): ingestion beside one read token's reports and backtests, at the readers' default shares, against ingestion alone)")
            out.line("(e) the reader honours Retry-After: a 429 or 503 delays that connection's next request by its seconds")
            out.line("(e) one read token at the default shares (2 reads and 1 backtest at a time, 10 a second in bursts of 30; 1 backtest per instance, 4 waiting), reads pool \(reports.readsPool):")
            for (what, connections, part) in [
                ("reports: GET \(reports.path)", reports.connections, run), ("backtests: POST \(backtests.path)", backtests.connections, backtests.run),
            ] {
                out.line(
                    "    \(what), \(connections) connections: \(Format.fixed(part.requestsPerSecond, 1)) answers/s 2xx, 429: \(Format.grouped(ReportLoad.count(429, in: part))), 503: \(Format.grouped(ReportLoad.count(503, in: part))); p50 \(Format.fixed(part.latency.p50, 2)) ms, p99 \(Format.fixed(part.latency.p99, 2)) ms; socket errors \(part.socketErrors)")
            }
        } else {
            let ratio = Format.fixed(loaded.ingest.run.events.perSecond / max(batch.run.events.perSecond, 1), 2)
            out.line("(e)/(b) rows/s = \(ratio)  (ingestion beside a report load against ingestion alone; no target)")
            out.line("(e) report load: GET \(reports.path), \(reports.connections) connections, reads pool \(reports.readsPool):")
            out.line("    \(Format.fixed(run.requestsPerSecond, 1)) answers/s 2xx, p50 \(Format.fixed(run.latency.p50, 2)) ms, p99 \(Format.fixed(run.latency.p99, 2)) ms, max \(Format.fixed(run.latency.max, 2)) ms; statuses \(run.statuses); socket errors \(run.socketErrors)")
        }
        let unexpected = reports.unexpectedStatuses
        if run.answered2xx == 0 || !unexpected.isEmpty || run.socketErrors.timeout != 0 {
            out.line("    REPORT LOAD: \(run.answered2xx) 2xx answers, statuses other than 2xx and 503: \(unexpected.isEmpty ? "none" : unexpected.joined(separator: ",")), \(run.socketErrors.timeout) timeouts; first ones:")
            for sample in run.samples { out.line("      " + sample) }
            out.fail()
        }
    }

    private func pgbenchRow(_ name: String, _ reference: PgbenchCase) -> String {
        Self.table.row([
            name, Format.fixed(rowsPerSecond(reference), 1), Format.fixed(reference.result.transactionsPerSecond, 1),
            "-", "-", "-", reference.cpu,
        ])
    }

    private func httpRow(_ name: String, _ http: HTTPCase) -> String {
        Self.table.row([
            name, Format.fixed(http.run.events.perSecond, 1), Format.fixed(http.run.requestsPerSecond, 1),
            Format.fixed(http.run.latency.p50, 2), Format.fixed(http.run.latency.p99, 2), "\(http.run.non2xx)", http.cpu,
        ])
    }

    /// Every acknowledged event stored, once; rows beyond them only from requests without a 2xx answer.
    private func integrity(_ tag: String, _ http: HTTPCase, into out: inout SummaryWriter) {
        let run = http.run
        let rowsOfAcknowledged = http.rowsStored - http.rowsOfUnansweredRequests
        if rowsOfAcknowledged == run.events.accepted && http.rowsStored == run.events.accepted {
            out.line("(\(tag)) rows stored \(http.rowsStored) = events acknowledged \(run.events.accepted)  OK")
        } else if rowsOfAcknowledged == run.events.accepted {
            out.line("(\(tag)) rows stored \(http.rowsStored) = events acknowledged \(run.events.accepted) + \(http.rowsOfUnansweredRequests) rows of the \(run.unanswered) requests sent but not answered 2xx")
            if run.non2xx == 0 {
                out.line("    (in flight when wrk stopped: wrk does not wait for them); every acknowledged event is stored  OK")
            } else {
                out.line("    (in flight when wrk stopped, or answered non-2xx); every acknowledged event is stored  OK")
            }
        } else {
            out.line("(\(tag)) MISMATCH: events acknowledged \(run.events.accepted), rows of acknowledged requests \(rowsOfAcknowledged) (rows stored \(http.rowsStored), of them \(http.rowsOfUnansweredRequests)")
            out.line("    from the \(run.unanswered) requests sent but not answered 2xx)")
            out.fail()
        }
        if http.partialRequests != 0 || run.unmatched != 0 || run.events.notAccepted != 0 {
            out.line("    ANOMALY: \(http.partialRequests) requests stored partially, \(run.unmatched) 2xx answers naming no sent request, \(run.events.notAccepted) events duplicate/rejected")
            out.fail()
        }
        if run.non2xx != 0 {
            out.line("    NON-2XX: \(run.non2xx) answers; first ones (raw: \(outputFolder)/\(tag)-wrk.txt):")
            for sample in run.samples { out.line("      " + sample) }
            out.fail()
        }
    }
}
