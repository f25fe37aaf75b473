import BenchmarkKit
import Foundation

/// `scripts/bench ingest`: (a) pgbench with 100-row unnest INSERTs, (b) POST /v1/events with 100 events per
/// request, (c) pgbench with 1-row INSERTs, (d) POST /v1/events with 1 event per request, (e) as (b) while
/// one read token asks for a report again and again on 8 connections and for a backtest on 2 more, at the
/// readers' default shares (docs/BENCHMARKS.md, "Performance targets", row "ingestion beside readers").
struct IngestBenchmark {
    let bench: Bench
    let duration: Int
    /// UPSHIFT_READ_POOL_CONNECTIONS of the server in every case.
    let readsPool: Int
    /// The ingest key of app "bench".
    private var key = ""
    /// A read token, for the report load of case (e).
    private var readToken = ""

    /// Case (e)'s report: every install posted in this run (cases (b), (d) and (e), as far as the
    /// projections applied them) is on 1.8.0, below 1.9.0, so the report counts a population that grows
    /// while the case runs, as a rollout owner's preview before raising the minimum would.
    static let reportPath = "/v1/apps/bench/reports/minimum-impact?platform=ios&version=1.9.0&window=7"
    /// Case (e)'s report load: 8 clients asking a report and 2 asking a backtest, one read token.
    static let reportConnections = 8
    static let backtestConnections = 2
    /// Case (e)'s backtest: the policy as it stands, over the installs of the last 7 days.
    static let backtestPath = "/v1/apps/bench/preview?platform=ios&window=7"

    init(bench: Bench, duration: Int, readsPool: Int) {
        self.bench = bench
        self.duration = duration
        self.readsPool = readsPool
    }

    mutating func run() throws -> Summary {
        try prepareDatabase()
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        let durability = try bench.durability()
        let postgres = try bench.sqlValue("SHOW server_version")

        let a = try best("a", script: "ingest-batch.sql", rowsPerTransaction: 100)
        let b = try http("b", connections: 16, eventsPerRequest: 100, roles: "http").ingest
        let c = try best("c", script: "ingest-single.sql", rowsPerTransaction: 1)
        let d = try http("d", connections: 64, eventsPerRequest: 1, roles: "http").ingest
        // (e0): the readers' reference, with (e)'s roles: the projections apply what is posted in both.
        let alone = try http("e0", connections: 16, eventsPerRequest: 100, roles: "http,projections").ingest
        let e = try http("e", connections: 16, eventsPerRequest: 100, roles: "http,projections", besideReports: true)
        var summary = IngestSummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgres, durability: durability),
            durationSeconds: duration, cpus: bench.cpus, outputFolder: bench.output, batchReference: a, batch: b,
            singleReference: c, single: d, underReportLoad: e.reports.map { .init(ingest: e.ingest, reports: $0, alone: alone) })
        summary.roles =
            "(b), (d) http: the ingestion path alone, as an instance of that role serves it (docs/OPERATIONS.md,"
            + " deployment; the projections have their own benchmark); (e0), (e) http,projections: the readers' reports"
            + " read projections that also apply every event posted"
        return summary.render()
    }

    /// The database with app "bench", an ingest key, and the partitions `upshift serve` would create.
    private mutating func prepareDatabase() throws {
        try bench.recreateDatabase("upshift_bench")
        try bench.upshift(["apps", "create", "--id", "bench", "--name", "Bench"])
        key = try bench.createKey(["--scope", "ingest", "--name", "bench", "--app", "bench"])
        readToken = try bench.createKey(["--scope", "read", "--name", "bench-reports"])
        // upshift serve creates these at start; the pgbench cases run without it.
        _ = try bench.sql("SELECT upshift_ensure_event_partitions(now() - interval '31 days', now() + interval '2 months')")
    }

    /// Case (a) or (c) at its best: pgbench with 4, 16 and 64 clients; the run that stored the most rows counts.
    private func best(_ tag: String, script: String, rowsPerTransaction: Int) throws -> IngestSummary.PgbenchCase {
        var runs: [(clients: Int, run: IngestSummary.PgbenchCase)] = []
        for clients in [4, 16, 64] {
            runs.append((clients, try pgbench("\(tag)\(clients)", clients: clients, script: script, rowsPerTransaction: rowsPerTransaction)))
        }
        var best = runs.max { $0.run.rowsStored < $1.run.rowsStored }!
        best.run.clients = best.clients
        for (clients, run) in runs { best.run.tried[clients] = Double(run.rowsStored) / Double(duration) }
        log("case (\(tag)): the best reference is pgbench with \(best.clients) clients")
        return best.run
    }

    /// Case (a) or (c): pgbench on the bench database.
    private func pgbench(
        _ tag: String, clients: Int, script: String, rowsPerTransaction: Int
    ) throws -> IngestSummary.PgbenchCase {
        let out = bench.path("\(tag)-pgbench.txt")
        try bench.resetEvents()
        let before = try bench.cpuTicks()
        log("case (\(tag)): pgbench, \(clients) clients, rows/transaction: \(rowsPerTransaction), \(duration)s")
        // pgbench takes a connection URI as its database name. synchronous_commit=on as the server forces it.
        let status = try Processes.run(
            Command(
                "pgbench", [
                    "-n", "-M", "prepared", "-c", "\(clients)", "-j", "2", "-T", "\(duration)",
                    "-D", "n=\(rowsPerTransaction)", "-f", bench.environment.script(script), bench.database.description,
                ], environment: ["PGOPTIONS": "-c synchronous_commit=on"]),
            stdout: .file(out), stderr: .append(out))
        let cpu = before.busyShare(until: try bench.cpuTicks())
        guard status == 0 else {
            printTail(of: out, lines: 40)
            throw BenchFailure("pgbench failed in case (\(tag)) (output: \(out))")
        }
        let rows = try bench.countEvents()
        bench.note("rows stored after the run: \(rows)", to: out)
        let result = try PgbenchResult(parsing: String(contentsOfFile: out, encoding: .utf8))
        return IngestSummary.PgbenchCase(result: result, rowsStored: rows, cpu: cpu)
    }

    /// Case (b), (d) or (e): wrk against `upshift serve`, then which stored rows belong to which requests.
    /// `besideReports`: a second wrk asks for ``reportPath`` on ``reportConnections`` connections for the
    /// same duration.
    private func http(_ tag: String, connections: Int, eventsPerRequest: Int, roles: String, besideReports: Bool = false) throws
        -> (ingest: IngestSummary.HTTPCase, reports: IngestSummary.ReportLoad?)
    {
        let out = bench.path("\(tag)-wrk.txt")
        let unanswered = bench.path("\(tag)-unanswered.txt")
        try bench.resetEvents()
        let server = try bench.startServer(
            log: bench.path("\(tag)-serve.log"),
            settings: [
                "UPSHIFT_EVENTS_RATE_LIMIT": "0", "UPSHIFT_EVENTS_KEY_RATE_LIMIT": "0",
                "UPSHIFT_READ_POOL_CONNECTIONS": "\(readsPool)", "UPSHIFT_ROLES": roles,
            ])
        log("case (\(tag)): wrk, 2 threads, \(connections) connections, events/request: \(eventsPerRequest), \(duration)s")
        let before = try bench.cpuTicks()
        let reportsOut = bench.path("\(tag)-reports-wrk.txt")
        let reportLoad = try besideReports ? Processes.start(
            Command("wrk", [
                "-t", "1", "-c", "\(Self.reportConnections)", "-d", "\(duration)s", "--timeout", "10s", "--latency",
                "-s", bench.environment.script("projections-report.lua"), server.url + Self.reportPath,
            ], environment: ["UPSHIFT_BENCH_TOKEN": readToken, "UPSHIFT_BENCH_RETRY_AFTER": "1"]),
            what: "wrk (reports)", stdout: .file(reportsOut), stderr: .append(reportsOut)) : nil
        let backtestsOut = bench.path("\(tag)-backtests-wrk.txt")
        let backtestLoad: RunningProcess?
        if besideReports {
            let paths = bench.path("\(tag)-backtest-paths.txt")
            try Data("\(Self.backtestPath)\t{}\n".utf8).write(to: URL(fileURLWithPath: paths))
            backtestLoad = try Processes.start(
                Command("wrk", [
                    "-t", "1", "-c", "\(Self.backtestConnections)", "-d", "\(duration)s", "--timeout", "15s", "--latency",
                    "-s", bench.environment.script("projections-report.lua"), server.url + Self.backtestPath,
                ], environment: ["UPSHIFT_BENCH_TOKEN": readToken, "UPSHIFT_BENCH_PATHS": paths, "UPSHIFT_BENCH_RETRY_AFTER": "1"]),
                what: "wrk (backtests)", stdout: .file(backtestsOut), stderr: .append(backtestsOut))
            log("case (\(tag)): beside it, one read token: wrk asking GET \(Self.reportPath) on \(Self.reportConnections) connections and POST \(Self.backtestPath) on \(Self.backtestConnections), at the readers' default shares")
        } else {
            backtestLoad = nil
        }
        // --timeout 10s: a slow answer is still an answer (the server gives up on a flush after 3 s with 503).
        let status = try Processes.run(
            Command(
                "wrk", [
                    "-t", "2", "-c", "\(connections)", "-d", "\(duration)s", "--timeout", "10s", "--latency",
                    "-s", bench.environment.script("events.lua"), server.url + "/v1/events", "--",
                    "\(eventsPerRequest)", unanswered,
                ], environment: ["UPSHIFT_BENCH_KEY": key]),
            stdout: .file(out), stderr: .append(out))
        let reportStatus = reportLoad?.wait()
        let backtestStatus = backtestLoad?.wait()
        let cpu = before.busyShare(until: try bench.cpuTicks())
        guard status == 0 else {
            printTail(of: out, lines: 40)
            throw BenchFailure("wrk failed in case (\(tag)) (output: \(out))")
        }
        if let backtestStatus, backtestStatus != 0 {
            printTail(of: backtestsOut, lines: 40)
            throw BenchFailure("wrk asking for backtests failed in case (\(tag)) (output: \(backtestsOut))")
        }
        if let reportStatus, reportStatus != 0 {
            printTail(of: reportsOut, lines: 40)
            throw BenchFailure("wrk asking for reports failed in case (\(tag)) (output: \(reportsOut))")
        }
        let usage = try bench.stop(server)
        bench.note("upshift serve: \(usage); exit status after SIGTERM: \(usage.exitStatus)", to: out)
        let run = try EventsRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))

        // Which stored rows belong to requests that got no 2xx answer (the first 32 characters of an event
        // id name its request), and whether every stored request is whole (all its events or none).
        let counts = try PsqlOutput.integers(bench.psql(["-F", " "], stdin: """
            CREATE TEMP TABLE unanswered (name text PRIMARY KEY);
            \\copy unanswered FROM \(PsqlOutput.quoted(unanswered))
            SELECT count(*),
                   count(*) FILTER (WHERE left(event_id::text, 32) IN (SELECT name FROM unanswered)),
                   (SELECT count(*) FROM (SELECT 1 FROM event_log GROUP BY left(event_id::text, 32)
                                           HAVING count(*) <> \(eventsPerRequest)) AS partial)
            FROM event_log;
            """))
        guard counts.count == 3 else { throw BenchFailure("the count of stored rows printed \(counts)") }
        bench.note(
            "rows stored: \(counts[0]) (of requests without a 2xx answer: \(counts[1]); requests stored partially: \(counts[2]))",
            to: out)
        let ingest = IngestSummary.HTTPCase(
            run: run, cpu: cpu, server: usage, rowsStored: counts[0], rowsOfUnansweredRequests: counts[1],
            partialRequests: counts[2])
        let reports = try reportLoad.map { _ in
            IngestSummary.ReportLoad(
                path: Self.reportPath, connections: Self.reportConnections, readsPool: readsPool,
                run: try ReportRun(WrkSummary(parsing: String(contentsOfFile: reportsOut, encoding: .utf8))),
                backtests: .init(
                    path: Self.backtestPath, connections: Self.backtestConnections,
                    run: try ReportRun(WrkSummary(parsing: String(contentsOfFile: backtestsOut, encoding: .utf8)))))
        }
        return (ingest, reports)
    }
}
