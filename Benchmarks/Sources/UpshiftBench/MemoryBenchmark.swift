import ArgumentParser
import BenchmarkKit
import Foundation

/// `scripts/bench memory`.
struct Memory: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "The body budget under many slow gzip bodies, and the rate limiters' tables at capacity.",
        discussion: """
            Many connections each post, slowly, a gzip body inflating to just under 1 MiB, again and again, \
            while polite clients post batches of 100 events honouring Retry-After and checks run at about \
            200/s. Passes when the RSS of upshift serve stays within 200 MB (DESIGN.md section 10), every \
            check answers 2xx within 1 s, every polite batch is stored once, and the refusals are the body \
            budget's, not a rate limiter's. Then, on a server of its own, fills the rate limiters' tables \
            with 100,000 client addresses each and prints what they hold in memory (docs/OPERATIONS.md).
            """)

    @Option(help: "Seconds of slow bodies.")
    var duration = 30

    @Option(help: "Connections sending slow bodies.")
    var connections = 2_000

    @Option(help: "Seconds over which each slow body is sent.")
    var spread = 20

    @Option(help: "Polite clients posting events.")
    var clients = 20

    @Option(help: "Client addresses per rate limiter's table (0: skip the tables).")
    var tableClients = 100_000

    func validate() throws {
        for (name, value) in [("duration", duration), ("connections", connections), ("spread", spread), ("clients", clients)]
        where value <= 0 {
            throw ValidationError("--\(name) must be a positive whole number, not \(value)")
        }
        guard tableClients >= 0 else { throw ValidationError("--table-clients must be 0 or more, not \(tableClients)") }
        guard clients <= 65_536 else { throw ValidationError("--clients must be at most 65,536") }
    }

    func run() throws {
        try BenchmarkRun.run("memory") { bench in
            try MemoryBenchmark(
                bench: bench, duration: duration, connections: connections, spread: spread, clients: clients,
                tableClients: tableClients
            ).run()
        }
    }
}

struct MemoryBenchmark {
    let bench: Bench
    let duration: Int
    let connections: Int
    let spread: Int
    let clients: Int
    let tableClients: Int

    static let app = "memory"
    /// What each slow body inflates to: just under the 1 MiB a batch may be.
    static let inflatedBytes = (1 << 20) - 1_024
    static let budgetBytes = 32 << 20
    static let eventsPerBatch = 100
    /// Clients a rate limiter's table holds at most (`RateLimiter`'s capacity in the server).
    static let tableCapacity = 100_000

    func run() throws -> Summary {
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        try bench.recreateDatabase("upshift_bench_memory")
        try bench.upshift(["apps", "create", "--id", Self.app, "--name", "Memory"])
        try bench.upshift(["releases", "add", "--app", Self.app, "--platform", "ios", "--version", "1.0.0"])
        let key = try bench.createKey(["--scope", "ingest", "--name", "bench-memory", "--app", Self.app])
        let durability = try bench.durability()
        let postgres = try bench.sqlValue("SHOW server_version")
        try raiseFileLimit(to: connections + 1_024)
        let body = try slowBody()

        let server = try bench.startServer(
            log: bench.path("serve.log"), settings: ["UPSHIFT_TRUSTED_PROXIES": "127.0.0.1", "UPSHIFT_CHECK_RATE_LIMIT": "0"])
        let rssFile = bench.path("rss.txt")
        let rss = RSSSampler(pid: server.process.pid, file: rssFile)
        let checksOut = bench.path("checks-wrk.txt")
        let checksPaths = bench.path("check-paths.txt")
        let paths = ["1.0.0", "0.9.0", "0.8.0", "1.0.0&os=17.4"].map { "/v1/apps/\(Self.app)/check?platform=ios&version=\($0)" }
        try (paths.joined(separator: "\n") + "\n").write(toFile: checksPaths, atomically: true, encoding: .utf8)
        let checks = try Processes.start(
            Command("wrk", [
                "-t", "1", "-c", "4", "-d", "\(duration + 5)s", "--timeout", "1s", "--latency",
                "-s", bench.environment.script("projections-report.lua"), server.url + paths[0],
            ], environment: ["UPSHIFT_BENCH_TOKEN": "none", "UPSHIFT_BENCH_PATHS": checksPaths, "UPSHIFT_BENCH_PACE_MS": "20"]),
            what: "wrk (checks)", stdout: .file(checksOut), stderr: .append(checksOut))
        log("slow bodies: \(connections) connections, \(body.count) gzip bytes each over \(spread) s, for \(duration) s; \(clients) polite clients; checks at about 200/s")
        let head = [
            "POST /v1/events HTTP/1.1", "Host: 127.0.0.1:\(server.port)", "Authorization: Bearer \(key)",
            "Content-Type: application/json", "Content-Encoding: gzip", "Content-Length: \(body.count)",
        ].joined(separator: "\r\n") + "\r\n"
        let slow = SlowBodies(.init(
            port: server.port, connections: connections, head: head, body: Array(body), spread: Double(spread),
            duration: Double(duration)))
        let slowOutcome = Protected<SlowBodies.Outcome?>(nil)
        let slowFailure = Protected<String?>(nil)
        let slowDone = DispatchSemaphore(value: 0)
        Thread {
            do {
                let outcome = try slow.run()
                slowOutcome.withLock { $0 = outcome }
            } catch {
                slowFailure.withLock { $0 = "\(error)" }
            }
            slowDone.signal()
        }.start()
        let begin = Date()
        let polite = PoliteClients(.init(
            url: server.url, key: key, app: Self.app, clients: clients, eventsPerBatch: Self.eventsPerBatch,
            duration: Double(duration))).run()
        slowDone.wait()
        let seconds = Date().timeIntervalSince(begin)
        guard checks.wait() == 0 else { throw BenchFailure("wrk asking checks failed (output: \(checksOut))") }
        if let failure = slowFailure.withLock({ $0 }) { throw BenchFailure("the slow bodies failed: \(failure)") }
        let metrics = PrometheusText(String(decoding: try HTTP.send("GET", server.url + "/metrics").body, as: UTF8.self))
        let installs = (0..<clients).map { "'\(PoliteClients.installId($0))'" }.joined(separator: ",")
        let politeEvents = try bench.sqlInteger("SELECT count(*) FROM event_log WHERE install_id IN (\(installs))")
        rss.stop()
        let usage = try bench.stop(server)
        let sampled = RSSSamples(parsing: (try? String(contentsOfFile: rssFile, encoding: .utf8)) ?? "").peakMiB() ?? 0
        let outcome = slowOutcome.withLock { $0 } ?? SlowBodies.Outcome()
        let (tables, tablesServer) = try limiterTables(key: key)

        return MemorySummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgres, durability: durability),
            outputFolder: bench.output, seconds: seconds, budgetBytes: Self.budgetBytes,
            slow: .init(
                connections: connections, bodyBytes: body.count, inflatedBytes: Self.inflatedBytes,
                spreadSeconds: Double(spread), attempts: outcome.attempts, bodiesSent: outcome.bodiesSent,
                answers: outcome.answers, mostHeld: outcome.mostHeld),
            polite: .init(
                clients: clients, eventsPerBatch: Self.eventsPerBatch, batchesStored: polite.batchesStored,
                batchesLost: polite.batchesLost, answers: polite.answers, failures: polite.failures, eventsInLog: politeEvents),
            checks: try ReportRun(WrkSummary(parsing: String(contentsOfFile: checksOut, encoding: .utf8))),
            budgetRefused: metrics.sum("upshift_body_budget_refused_total") ?? 0,
            rateLimited: metrics.sum("upshift_rate_limited_total") ?? 0, sampledPeakMiB: sampled, server: usage,
            tables: tables, tablesServer: tablesServer
        ).render()
    }

    /// A batch of one event padded with JSON whitespace to ``inflatedBytes``, gzipped.
    private func slowBody() throws -> Data {
        let event = #"{"id":"\#(UUID().uuidString.lowercased())","occurredAt":"\#(Format.iso8601(Date()))","installId":"00000000-0000-4000-8000-ffffffffffff","platform":"ios","appVersion":"1.0.0","type":"launched","appId":"\#(Self.app)"}"#
        let head = #"{"events":["# + event
        let json = head + String(repeating: " ", count: Self.inflatedBytes - head.utf8.count - 2) + "]}"
        let body = try Processes.outputData(Command("gzip", ["-9", "-n", "-c"]), stdin: json)
        try body.write(to: URL(fileURLWithPath: bench.path("slow-body.json.gz")))
        return body
    }

    /// The connections need file descriptors: the soft limit is raised to the hard one, which must cover them.
    private func raiseFileLimit(to needed: Int) throws {
        var limit = rlimit()
        getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        if limit.rlim_cur < rlim_t(needed) {
            limit.rlim_cur = min(limit.rlim_max, rlim_t(max(needed, 0)))
            setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
            getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
        }
        guard limit.rlim_cur >= rlim_t(needed) else {
            throw BenchFailure("the open-file limit is \(limit.rlim_cur) (hard \(limit.rlim_max)); \(needed) are needed for --connections \(connections): raise it (ulimit -Hn) or lower --connections")
        }
    }

    // MARK: the rate limiters' tables

    /// A fresh server at the default limits (127.0.0.1 a trusted proxy): each table filled with
    /// `tableClients` client addresses, its VmRSS before and after; then the check's table once more with
    /// as many new addresses, past its capacity.
    private func limiterTables(key: String) throws -> ([MemorySummary.LimiterTable], ServerUsage?) {
        guard tableClients > 0 else { return ([], nil) }
        let server = try bench.startServer(log: bench.path("tables-serve.log"), settings: ["UPSHIFT_TRUSTED_PROXIES": "127.0.0.1"])
        let check = "/v1/apps/\(Self.app)/check?platform=ios&version=1.0.0"
        let cases: [(name: String, path: String, environment: [String: String], base: Int)] = [
            ("check (per address)", check, [:], 0),
            ("events (per address, before the key)", "/v1/events", ["UPSHIFT_BENCH_METHOD": "POST", "UPSHIFT_BENCH_BODY": "{}"], 0),
            ("dashboard sign-in (per address)", "/dashboard/sign-in", [
                "UPSHIFT_BENCH_METHOD": "POST", "UPSHIFT_BENCH_BODY": "token=none",
                "UPSHIFT_BENCH_CONTENT_TYPE": "application/x-www-form-urlencoded",
            ], 0),
            ("check again, \(Format.grouped(tableClients)) new addresses\(tableClients >= Self.tableCapacity ? " (past its capacity: the least recently seen forgotten)" : "")", check, [:], tableClients),
        ]
        // Every route once, so that what a first request allocates is not counted as a table's.
        for (_, path, environment, _) in cases {
            _ = try HTTP.send(
                environment["UPSHIFT_BENCH_METHOD"] ?? "GET", server.url + path, body: environment["UPSHIFT_BENCH_BODY"],
                headers: ["Content-Type": environment["UPSHIFT_BENCH_CONTENT_TYPE"] ?? "application/json"])
        }
        Thread.sleep(forTimeInterval: 1)
        var tables: [MemorySummary.LimiterTable] = []
        for (index, table) in cases.enumerated() {
            let before = try bench.residentMiB(server.process.pid)
            let out = bench.path("table-\(index)-wrk.txt")
            let threads = 2
            var environment = table.environment
            environment["UPSHIFT_BENCH_ADDRESSES"] = "\(tableClients)"
            environment["UPSHIFT_BENCH_ADDRESS_BASE"] = "\(table.base)"
            log("rate limiter table: \(table.name), \(tableClients) client addresses")
            guard try Processes.run(
                Command("wrk", [
                    "-t", "\(threads)", "-c", "16", "-d", "\(max(10, tableClients / 5_000))s", "--timeout", "5s",
                    "-s", bench.environment.script("memory-addresses.lua"), server.url + table.path, "--", "\(threads)",
                ], environment: environment),
                stdout: .file(out), stderr: .append(out)) == 0
            else { throw BenchFailure("wrk filling a rate limiter's table failed (output: \(out))") }
            Thread.sleep(forTimeInterval: 1)
            let summary = try WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8))
            tables.append(.init(
                name: table.name, clients: tableClients, addressesNamed: try summary.integer("addresses"),
                statuses: try summary.text("statuses"), rssBeforeMiB: before, rssAfterMiB: try bench.residentMiB(server.process.pid)))
        }
        return (tables, try bench.stop(server))
    }
}
