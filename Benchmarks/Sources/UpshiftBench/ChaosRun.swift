import BenchmarkKit
import Foundation

/// One `scripts/chaos` run: a catalog and an ingest key on a fresh database of the run's own cluster,
/// `upshift serve` (release) under the chaos load, the faults of the plan, then the proofs.
struct ChaosRun {
    let bench: Bench
    let postgres: ChaosPostgres
    let plan: ChaosPlan
    let eventsPerSecond: Double
    let checksPerSecond: Double
    let recoveryBound: Double

    static let app = "chaos"
    /// One loopback client sends everything: the per-client and per-key limits would measure themselves.
    static let serverSettings = [
        "UPSHIFT_CHECK_RATE_LIMIT": "0", "UPSHIFT_EVENTS_RATE_LIMIT": "0", "UPSHIFT_EVENTS_KEY_RATE_LIMIT": "0",
    ]

    private var server: Server?
    private var servers = 0
    private var unexpectedExits: [String] = []
    /// Seconds into the load at which the server was found exited on its own.
    private var unexpectedExitTimes: [Double] = []

    init(bench: Bench, postgres: ChaosPostgres, plan: ChaosPlan, eventsPerSecond: Double, checksPerSecond: Double, recoveryBound: Double) {
        self.bench = bench
        self.postgres = postgres
        self.plan = plan
        self.eventsPerSecond = eventsPerSecond
        self.checksPerSecond = checksPerSecond
        self.recoveryBound = recoveryBound
    }

    mutating func run() throws -> Summary {
        let key = try prepareDatabase()
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        let durability = try bench.durability()
        let postgresVersion = try bench.sqlValue("SHOW server_version")
        log("plan (seed \(plan.seed)): " + plan.steps.map { "\(Format.fixed($0.at, 1)) s \($0.fault.rawValue)" }.joined(separator: "; "))

        let port = try bench.freePort()
        try startServer(port: port)
        let load = ChaosLoad(.init(
            baseURL: "http://127.0.0.1:\(port)", app: Self.app, ingestKey: key, eventsPerSecond: eventsPerSecond,
            checksPerSecond: checksPerSecond, seed: plan.seed))
        load.start()
        log("load: \(Format.fixed(eventsPerSecond, 0)) events/s and \(Format.fixed(checksPerSecond, 0)) checks/s for \(Format.fixed(plan.duration, 0)) s")

        var records: [ChaosSummary.FaultRecord] = []
        var outageWindow: (down: Double, up: Double)?
        var recoveryEnd: Double?
        for step in plan.steps {
            try watch(load, until: step.at)
            if outageWindow != nil, recoveryEnd == nil { recoveryEnd = load.now() }
            switch step.fault {
            case .killServer:
                records.append(try killAndRestart(step, load: load, port: port))
            case .partitionServer:
                records.append(try partition(step, load: load))
            case .restartPostgres:
                let down = load.now()
                log("\(Format.fixed(down, 1)) s: pg_ctl restart -m immediate")
                try postgres.restartImmediately(log: bench.path("pg_ctl.log"))
                let up = load.now()
                log("\(Format.fixed(up, 1)) s: PostgreSQL accepts connections again (down \(Format.fixed(up - down, 1)) s)")
                outageWindow = (down, up)
                records.append(.init(fault: .restartPostgres, planned: step.at, done: down, back: up, detail: ""))
                try waitForRecovery(load, returned: up)
            }
        }
        let lastFault = records.compactMap(\.done).max() ?? 0
        try watch(load, until: max(plan.duration, lastFault + ChaosPlan.tail(plan.duration) / 2))
        if outageWindow != nil, recoveryEnd == nil { recoveryEnd = load.now() }
        log("stopping the load; waiting for the answers in flight")
        let loadSeconds = load.stop()
        try checkServerRunning(at: load.now())

        let exchanges = load.recorded()
        let ledger = load.ledger()
        if !ledger.unreadable.isEmpty {
            throw BenchFailure("\(ledger.unreadable.count) answers 200 of /v1/events could not be read: \(ledger.unreadable[0])")
        }
        let finalStatus = try stopServer()
        let incremental = try incrementalTables(port: port)
        let exactlyOnce = ExactlyOnce(
            sent: ledger.sent, acknowledged: ledger.acknowledged, stored: try storedEvents(), rejected: ledger.rejected)
        let rebuilt = try rebuiltTables()

        let outage = outageWindow.map { OutageVerdict(exchanges, down: $0.down, up: $0.up) }
        // A recovery counts only up to the first exit of the server after PostgreSQL returned: one that a
        // restart of the server brought is not a recovery without a restart.
        let recovery = outageWindow.flatMap { window in
            let exit = unexpectedExitTimes.first { $0 >= window.up }
            return RecoveryTime.seconds(exchanges, returned: window.up, end: min(recoveryEnd ?? loadSeconds, exit ?? .infinity))
        }
        let summary = ChaosSummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgresVersion, durability: durability),
            seed: plan.seed, plannedSeconds: plan.duration, recoveryBound: recoveryBound, outputFolder: bench.output,
            faults: records,
            load: .init(
                eventsPerSecond: eventsPerSecond, checksPerSecond: checksPerSecond, seconds: loadSeconds,
                singleBatches: ledger.singleBatches, hundredBatches: ledger.hundredBatches,
                resentInFlight: ledger.resentInFlight, resentAfterAnswer: ledger.resentAfterAnswer, retries: ledger.retries,
                skippedEvents: ledger.skippedEvents, skippedChecks: ledger.skippedChecks,
                eventsInFlightLimit: load.settings.eventsInFlightLimit, checksInFlightLimit: load.settings.checksInFlightLimit,
                longestPause: ledger.longestPause, longestPauseEnded: ledger.longestPauseEnded, retriedDuplicates: ledger.retriedDuplicates,
                events: OutcomeCounts(exchanges.filter { $0.endpoint == .events }),
                checks: OutcomeCounts(exchanges.filter { $0.endpoint == .check })),
            exactlyOnce: exactlyOnce, outage: outage, recovery: recovery,
            projections: ProjectionComparison(incremental: incremental, rebuilt: rebuilt),
            unexpectedExits: unexpectedExits, finalExitStatus: finalStatus)
        try writeExchanges(exchanges)
        return summary.render()
    }

    // MARK: the database

    /// A fresh database: app `chaos` with five releases per platform (the newest released halfway through
    /// the load), a policy with a minimum per platform, and an ingest key (returned).
    private func prepareDatabase() throws -> String {
        try bench.recreateDatabase("upshift_chaos")
        try bench.upshift([
            "apps", "create", "--id", Self.app, "--name", "Chaos", "--update-url", "ios=https://apps.apple.com/app/id1234567890",
            "--update-url", "android=https://play.google.com/store/apps/details?id=chaos",
        ])
        let now = Date()
        // The last release halfway through the load (which starts a few seconds from now).
        let halfway = -(plan.duration / 2 + 5) / 86_400
        for (version, age) in zip(ChaosFleet.versions, [120.0, 60, 20, 2, halfway]) {
            for platform in ChaosFleet.platforms {
                try bench.upshift([
                    "releases", "add", "--app", Self.app, "--platform", platform, "--version", version,
                    "--released-at", Format.iso8601(now.addingTimeInterval(-age * 86_400)),
                    "--minimum-os", platform == "ios" ? "16.0" : "12", "--note", "en=Release \(version)",
                ])
            }
        }
        for platform in ChaosFleet.platforms {
            try bench.upshift([
                "policy", "set", "--app", Self.app, "--platform", platform, "--minimum", "1.1.0", "--notify-after-days", "1",
                "--block-after-days", "30", "--reason", "chaos",
            ])
        }
        return try bench.createKey(["--scope", "ingest", "--name", "chaos", "--app", Self.app])
    }

    /// Rows of the run's events in `event_log` by id: the client events (not the server's `checked`
    /// events, not the catalog's stream events).
    private func storedEvents() throws -> [UUID: Int] {
        let output = try bench.sql(
            """
            SELECT event_id, count(*) FROM event_log
            WHERE app_id = '\(Self.app)' AND stream_id IS NULL AND type <> 'checked' GROUP BY event_id
            """, separator: " ")
        var stored: [UUID: Int] = [:]
        for row in PsqlOutput(parsing: output, separator: " ").rows {
            guard row.count == 2, let id = UUID(uuidString: row[0]), let count = Int(row[1]) else {
                throw BenchFailure("event_log row \(row.joined(separator: " ")) is not `id count`")
            }
            stored[id] = count
        }
        return stored
    }

    /// The projections as the server's runners left them, after a server with only the projections
    /// role (nothing else writes) has applied the whole log.
    private mutating func incrementalTables(port: Int) throws -> [String: [String]] {
        servers += 1
        let projector = try bench.startServer(
            log: bench.path("serve-\(servers)-projections.log"), settings: ["UPSHIFT_ROLES": "projections"], port: port)
        let deadline = Date().addingTimeInterval(600)
        var status: ProjectionStatus?
        repeat {
            // Before the projector has created them, the command prints no table.
            status = try? ProjectionStatus(parsing: try bench.upshiftOutput(["projections", "status"]))
            if let status, status.caughtUp(expecting: ProjectionTables.names) { break }
            guard Date() < deadline else {
                _ = projector.process.stop()
                throw BenchFailure("the projections did not catch up within 600 s: \(status?.active ?? [])")
            }
            Thread.sleep(forTimeInterval: 1)
        } while true
        guard let status else { throw BenchFailure("no projection status") }
        log("projections caught up: " + status.active.map { "\($0.name) \($0.events) events" }.joined(separator: ", "))
        let tables = try projectionTables()
        let exit = projector.process.stop()
        guard exit == 0 else { throw BenchFailure("upshift serve --roles projections exited \(exit) after SIGTERM") }
        return tables
    }

    /// Every projection rebuilt from the whole log into new tables by `upshift projections rebuild`.
    private func rebuiltTables() throws -> [String: [String]] {
        for name in ProjectionTables.names {
            log("upshift projections rebuild \(name)")
            try bench.upshift(["projections", "rebuild", name])
        }
        return try projectionTables()
    }

    /// The rows of every active projection table as JSON text, by base table name, and each projection's
    /// dead letters (without their generation and time).
    private func projectionTables() throws -> [String: [String]] {
        let tableNames = PsqlOutput(parsing: try bench.sql("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")).rows
            .map { $0[0] }
        let unknown = ProjectionTables.unknown(among: tableNames)
        guard unknown.isEmpty else {
            throw BenchFailure("generation tables of no known projection: \(unknown.joined(separator: ", ")) (add them to BenchmarkKit's ProjectionTables)")
        }
        var generations: [String: Int] = [:]
        for row in PsqlOutput(parsing: try bench.sql("SELECT name, generation FROM projections WHERE state = 'active'")).rows {
            generations[row[0]] = Int(row[1])
        }
        var tables: [String: [String]] = [:]
        for (name, bases) in ProjectionTables.byProjection {
            guard let generation = generations[name] else { throw BenchFailure("projection \(name) has no active generation") }
            for base in bases {
                tables[base] = try lines(bench.sql("SELECT row_to_json(t)::text FROM \(base)_g\(generation) t"))
            }
            tables["dead letters of \(name)"] = try lines(bench.sql(
                """
                SELECT tx_id || ' ' || position || ' ' || event_id || ' ' || type || ' ' || error
                FROM projection_dead_letters WHERE name = '\(name)' AND generation = \(generation)
                """))
        }
        return tables
    }

    private func lines(_ output: String) -> [String] {
        output.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
    }

    // MARK: the server

    /// The address the server reaches PostgreSQL through: the partition drops every packet to and from
    /// it, leaving the run's own connections (127.0.0.1) alone.
    static let serverDatabaseAddress = "127.0.0.2"

    private mutating func startServer(port: Int) throws {
        servers += 1
        var settings = Self.serverSettings
        settings["DATABASE_URL"] = bench.database.host(Self.serverDatabaseAddress).description
        server = try bench.startServer(log: bench.path("serve-\(servers).log"), settings: settings, port: port)
    }

    /// The partition: an nftables table that drops every packet to and from the server's PostgreSQL
    /// address and port, both ways (no socket closes, no keepalive is answered), for
    /// ``ChaosPlan/partitionSeconds``, then deleted.
    private mutating func partition(_ step: ChaosPlan.Step, load: ChaosLoad) throws -> ChaosSummary.FaultRecord {
        let table = "upshift_chaos_partition"
        let address = Self.serverDatabaseAddress, port = String(bench.database.port)
        func nft(_ arguments: [String]) throws {
            let status = try Processes.run(Command("nft", arguments), stdout: .append(bench.path("nft.log")), stderr: .append(bench.path("nft.log")))
            guard status == 0 else { throw BenchFailure("nft \(arguments.joined(separator: " ")) exited \(status) (log: \(bench.path("nft.log")))") }
        }
        _ = try? Processes.run(Command("nft", ["delete", "table", "inet", table]), stdout: .append(bench.path("nft.log")), stderr: .append(bench.path("nft.log")))
        let at = load.now()
        log("\(Format.fixed(at, 1)) s: black hole between upshift serve and PostgreSQL (\(address):\(port)) for \(Format.fixed(ChaosPlan.partitionSeconds, 0)) s")
        try nft(["add", "table", "inet", table])
        try nft(["add", "chain", "inet", table, "out", "{ type filter hook output priority 0 ; policy accept ; }"])
        try nft(["add", "rule", "inet", table, "out", "ip", "daddr", address, "tcp", "dport", port, "drop"])
        try nft(["add", "rule", "inet", table, "out", "ip", "saddr", address, "tcp", "sport", port, "drop"])
        try watch(load, until: at + ChaosPlan.partitionSeconds)
        try nft(["delete", "table", "inet", table])
        let back = load.now()
        log("\(Format.fixed(back, 1)) s: packets flow again")
        return .init(fault: .partitionServer, planned: step.at, done: at, back: back, detail: "")
    }

    /// The last `count` lines of a log file (none when it cannot be read): what a process said before it died.
    static func lastLines(of path: String, count: Int) -> [String] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true)
        return lines.suffix(count).map(String.init)
    }

    /// Waits until `at` seconds into the load, restarting the server if it exits on its own (counted).
    private mutating func watch(_ load: ChaosLoad, until at: Double) throws {
        while load.now() < at {
            try checkServerRunning(at: load.now())
            Thread.sleep(forTimeInterval: min(0.05, max(0, at - load.now())))
        }
    }

    private mutating func checkServerRunning(at time: Double) throws {
        guard let current = server, !current.process.isRunning else { return }
        let status = current.process.wait()
        unexpectedExits.append("pid \(current.process.pid) exit \(status) at \(Format.fixed(time, 1)) s")
        unexpectedExitTimes.append(time)
        log("upshift serve \(current.process.pid) exited on its own with \(status); the end of its log (\(current.log)):")
        for line in Self.lastLines(of: current.log, count: 40) { log("  | \(line)") }
        log("starting it again")
        try startServer(port: current.port)
    }

    private mutating func killAndRestart(_ step: ChaosPlan.Step, load: ChaosLoad, port: Int) throws -> ChaosSummary.FaultRecord {
        guard let current = server else { throw BenchFailure("no server to kill") }
        let at = load.now()
        log("\(Format.fixed(at, 1)) s: SIGKILL upshift serve \(current.process.pid)")
        kill(current.process.pid, SIGKILL)
        _ = current.process.wait()
        try startServer(port: port)
        let back = load.now()
        log("\(Format.fixed(back, 1)) s: upshift serve \(server!.process.pid) ready")
        return .init(fault: .killServer, planned: step.at, done: at, back: back, detail: "pid \(current.process.pid)")
    }

    /// SIGTERM to the server of the load (it writes what it holds); its exit status.
    private mutating func stopServer() throws -> Int32 {
        guard let current = server else { return -1 }
        server = nil
        return current.process.stop()
    }

    /// After the PostgreSQL restart no other fault comes before ingestion recovered (2 s of nothing but
    /// `200` after the first one) or twice the bound passed (at least 30 s), so that the recovery is
    /// measured without a restart of the server.
    private mutating func waitForRecovery(_ load: ChaosLoad, returned: Double) throws {
        let limit = returned + max(2 * recoveryBound, 30)
        while load.now() < limit {
            try checkServerRunning(at: load.now())
            if unexpectedExitTimes.contains(where: { $0 >= returned }) {
                log("the server exited before ingestion recovered: no recovery without a restart")
                return
            }
            let now = load.now()
            if let seconds = RecoveryTime.seconds(load.recorded(.events, since: returned), returned: returned, end: now),
               now - (returned + seconds) >= 2 {
                log("ingestion recovered \(Format.fixed(seconds, 2)) s after PostgreSQL returned")
                return
            }
            Thread.sleep(forTimeInterval: 0.2)
        }
        log("ingestion has not recovered \(Format.fixed(limit - returned, 0)) s after PostgreSQL returned; going on")
    }

    /// exchanges.tsv: every request of the load (endpoint, sent, answered, status, Retry-After).
    private func writeExchanges(_ exchanges: [Exchange]) throws {
        var text = "endpoint\tsent_s\tanswered_s\tstatus\tretry_after\n"
        for exchange in exchanges.sorted(by: { $0.sentAt < $1.sentAt }) {
            text += "\(exchange.endpoint.rawValue)\t\(Format.fixed(exchange.sentAt, 4))\t\(Format.fixed(exchange.answeredAt, 4))\t"
                + "\(exchange.status.map(String.init) ?? "-")\t\(exchange.retryAfter ? "yes" : "no")\n"
        }
        try text.write(toFile: bench.path("exchanges.tsv"), atomically: true, encoding: .utf8)
    }
}
