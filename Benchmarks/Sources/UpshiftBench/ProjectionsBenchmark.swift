import BenchmarkKit
import Foundation

/// The projections (docs/ARCHITECTURE.md, "Projections and reports").
enum ProjectionName: String, CaseIterable {
    case installState = "install_state"
    case adoption
    case releaseCohorts = "release_cohorts"
    case promptFunnel = "prompt_funnel"
    case releaseHealth = "release_health"
}

/// A synthetic history of one app on ios: its catalog (releases, policy) and how its events are
/// bulk-loaded into event_log with SQL.
struct SyntheticLog {
    struct Release {
        var version: String
        /// Days before the end of the history it came out.
        var daysAgo: Int
        /// The major of its minimum OS.
        var minimumOS: Int
    }

    var app: String
    var name: String
    /// Days of history before its end.
    var days: Int
    var releases: [Release]
    /// `upshift policy set` options, for a policy other than the default.
    var policy: [String] = []
    /// The load script in scripts/bench.d and its psql variables other than those every load script takes
    /// (app, chunks, job, jobs, end_epoch, days, release_days, release_os, release_versions).
    var script: String
    var variables: [(name: String, value: String)]
    /// Its transactions (chunks), loaded `jobs` at a time.
    var transactions: Int
    var jobs: Int
    /// The events it must load, when known before.
    var expectedEvents: Int?
    /// What it loads, for the log.
    var description: String
    /// Prefix of its raw output files.
    var files = ""
}

/// `scripts/bench projections`: a synthetic 90-day history loaded with SQL, then the catch-up of every
/// projection by `upshift serve`, report latency, and projection lag under 2,000 events/s of live load;
/// then the catch-up of a second log shaped unlike it (ProjectionsShape.swift).
struct ProjectionsBenchmark {
    let bench: Bench
    let events: Int
    let installs: Int
    let lagDuration: Int
    let reportDuration: Int
    let rebuild: ProjectionName?
    /// Whether `rebuild` is timed `--in-batches` too.
    let fold: Bool
    let rebuildLive: ProjectionName?
    /// Seconds of the live load during the rebuild under load.
    let rebuildDuration: Int
    /// Installs of the second catch-up's log (0: none).
    let shapeInstalls: Int
    /// Installs erased under load (0: none).
    let erase: Int

    static let app = "fleet"
    /// Releases 1.0.0 ... 1.9.0: days before the end of the history they came out, and the major of their
    /// minimum OS.
    static let releaseDaysAgo = [95, 86, 75, 66, 54, 45, 36, 24, 15, 5]
    static let releaseOS = [15, 15, 15, 15, 15, 16, 16, 16, 17, 17]
    /// The bulk load's transactions (slices of the 90 days), so that the feed has several tx_ids.
    static let chunks = 10
    /// Live load: events per request x requests per second = 2,000 events/s.
    static let liveEventsPerRequest = 20
    static let liveRequestsPerSecond = 100
    /// The reports and backtests are timed against the server, not against the readers' fair shares.
    static let noRateLimit = [
        "UPSHIFT_EVENTS_RATE_LIMIT": "0", "UPSHIFT_EVENTS_KEY_RATE_LIMIT": "0", "UPSHIFT_DASHBOARD_RATE_LIMIT": "0",
        "UPSHIFT_READER_RATE": "0", "UPSHIFT_READER_CONCURRENCY": "10000", "UPSHIFT_BACKTEST_CONCURRENCY": "64",
    ]

    /// The end of the synthetic history (Unix seconds), shared by the catalog and the load.
    private let end = Int(Date().timeIntervalSince1970)

    /// The main history: `events` of `installs` over 90 days, in time order (scripts/bench.d/projections-load.sql).
    var fleet: SyntheticLog {
        SyntheticLog(
            app: Self.app, name: "Fleet", days: 90,
            releases: Self.releaseDaysAgo.indices.map {
                SyntheticLog.Release(version: "1.\($0).0", daysAgo: Self.releaseDaysAgo[$0], minimumOS: Self.releaseOS[$0])
            },
            script: "projections-load.sql", variables: [("events", "\(events)"), ("installs", "\(installs)")],
            transactions: Self.chunks, jobs: min(bench.cpus, Self.chunks), expectedEvents: events,
            description: "\(events) events of \(installs) installs over 90 days")
    }

    init(
        bench: Bench, events: Int, installs: Int, lagDuration: Int, reportDuration: Int, rebuild: ProjectionName?,
        fold: Bool, rebuildLive: ProjectionName?, rebuildDuration: Int, shapeInstalls: Int, erase: Int = 0
    ) {
        self.bench = bench
        self.events = events
        self.installs = installs
        self.lagDuration = lagDuration
        self.reportDuration = reportDuration
        self.rebuild = rebuild
        self.fold = fold
        self.rebuildLive = rebuildLive
        self.rebuildDuration = rebuildDuration
        self.shapeInstalls = shapeInstalls
        self.erase = erase
    }

    func run() throws -> Summary {
        try bench.recreateDatabase("upshift_bench_projections")
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        let durability = try bench.durability()
        let postgres = try bench.sqlValue("SHOW server_version")
        let sharedBuffers = try bench.sqlValue("SHOW shared_buffers")
        try createCatalog(fleet, end: end)
        let keys = (
            ingest: try bench.createKey(["--scope", "ingest", "--name", "bench-ingest", "--app", Self.app]),
            read: try bench.createKey(["--scope", "read", "--name", "bench-reports"])
        )
        let load = try bulkLoad(fleet, end: end)

        // How long any transaction holds a transaction id (and so every feed), from the catch-up on.
        let xidSamples = bench.path("xids.txt")
        let xidSampler = try Processes.start(
            Command("psql", [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", bench.database.description,
                "-f", bench.environment.script("projections-xids.sql"),
            ]),
            what: "transaction-id sampler", stdout: .file(xidSamples), stderr: .file(bench.path("xids.err")))
        let catchUp = try self.catchUp(total: load.eventsInLog, files: fleet.files)
        let server = catchUp.server
        let spotCheck = self.spotCheck(app: Self.app, day: Date(timeIntervalSince1970: Double(end - 86400)))
        // The reports are measured while the live load runs: answers read from read models that move.
        let (live, reports) = try self.live(server, key: keys.ingest) { try self.reports(server, token: keys.read) }
        let rebuiltLive = try rebuildLive.map { try self.rebuildUnderLoad($0, server: server, key: keys.ingest) }
        let erased = try erase > 0 ? eraseUnderLoad(erase, server: server, key: keys.ingest) : nil
        let deadLetters = try bench.sqlInteger("SELECT count(*) FROM projection_dead_letters")
        // Events an erasure removed were applied before they left the log: they count as the log's.
        let erasedEvents = erase > 0 ? try bench.sqlInteger("SELECT coalesce(sum(events), 0) FROM erasures") : 0
        let counted = try progress(reaching: bench.countEvents() + erasedEvents)
        let finalEvents = try bench.countEvents() + erasedEvents
        let usage = try bench.stop(server)
        catchUp.sampler.stop()
        let rss = RSSSamples(parsing: (try? String(contentsOfFile: bench.path("rss.txt"), encoding: .utf8)) ?? "")
        let rebuilt = try rebuild.map { try self.rebuild($0, inBatches: false) }
        let folded = fold ? try rebuild.map { try self.rebuild($0, inBatches: true) } : nil
        _ = xidSampler.stop()
        let holds = XidHold.parse((try? String(contentsOfFile: xidSamples, encoding: .utf8)) ?? "")
        // On a database of its own, after this one's server stopped: its figures leave the others alone.
        let shape = try shapeInstalls > 0 ? shapeCatchUp() : nil

        var summary = ProjectionsSummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgres, durability: durability),
            sharedBuffers: sharedBuffers, app: Self.app, events: events, installs: installs,
            lagDurationSeconds: liveSeconds, reportDurationSeconds: reportDuration, cpus: bench.cpus,
            outputFolder: bench.output, load: load, catchUp: catchUp.figures, catchUpCPU: catchUp.cpu,
            catchUpServerCPUSeconds: catchUp.serverCPUSeconds, reports: reports, live: live.figures,
            liveEventsPerRequest: Self.liveEventsPerRequest, liveRequestsPerSecond: Self.liveRequestsPerSecond,
            rssCatchUpMiB: rss.peakMiB(from: catchUp.start, to: catchUp.end),
            rssLiveMiB: rss.peakMiB(from: live.start, to: live.end), rssPeakMiB: rss.peakMiB(), server: usage,
            serverLogLines: bench.logLines(server), rebuild: rebuilt, spotCheck: spotCheck, deadLetters: deadLetters,
            counted: counted, finalEvents: finalEvents)
        summary.reportsDuringLive = true
        summary.fold = folded
        summary.xidHolds = ProjectionsSummary.XidHolds(
            catchUp: XidHold.longest(holds, from: catchUp.start, to: catchUp.end),
            live: XidHold.longest(holds, from: live.start, to: live.end),
            rebuild: rebuiltLive.flatMap { XidHold.longest(holds, from: $0.start, to: $0.end) })
        summary.rebuildUnderLoad = rebuiltLive?.figures
        summary.erasureUnderLoad = erased
        summary.secondLog = shape
        return summary.render()
    }

    // MARK: the catalog and the load

    /// The app of `history`, its ios releases and its policy, created with the CLI, each release `daysAgo`
    /// days before `end`. Catalog events come first in the feed.
    func createCatalog(_ history: SyntheticLog, end: Int) throws {
        log("creating the catalog: app \(history.app), \(history.releases.count) ios releases")
        try bench.upshift([
            "apps", "create", "--id", history.app, "--name", history.name, "--update-url", "ios=https://apps.apple.com/app/id1234567890",
        ])
        for release in history.releases {
            let released = Date(timeIntervalSince1970: Double(end - release.daysAgo * 86400))
            try bench.upshift([
                "releases", "add", "--app", history.app, "--platform", "ios", "--version", release.version,
                "--released-at", Format.iso8601(released), "--minimum-os", "\(release.minimumOS).0",
                "--note", "en=Release \(release.version)", "--reason", "scripts/bench projections",
            ])
        }
        if !history.policy.isEmpty {
            try bench.upshift(
                ["policy", "set", "--app", history.app, "--platform", "ios"] + history.policy + ["--reason", "scripts/bench projections"])
        }
        // Projections close adoption days 31 days behind the largest recorded_at they have read, so catalog
        // events recorded now, ahead of a feed of client events recorded over the days before, would close
        // the first of those days before their events are read (they are "not counted", and the server
        // says so). In the history a load stands for, the catalog was written before those events: date
        // its events back to 6 days before the history starts, keeping their feed order.
        _ = try bench.sql("SELECT upshift_ensure_event_partitions(now() - interval '\(history.days + 10) days', now() + interval '2 months')")
        _ = try bench.sql("""
            UPDATE event_log
            SET occurred_at = to_timestamp(\(end)) - interval '\(history.days + 6) days' + position * interval '1 second',
                recorded_at = to_timestamp(\(end)) - interval '\(history.days + 6) days' + position * interval '1 second'
            WHERE install_id IS NULL
            """)
    }

    /// The bulk load of `history` (its script in scripts/bench.d), one psql per core, each loading every
    /// jobs-th chunk; then VACUUM (ANALYZE), as the log of a running system would be. Writes
    /// `<files>load-types.txt`, the events of each type.
    func bulkLoad(_ history: SyntheticLog, end: Int) throws -> ProjectionsSummary.BulkLoad {
        let (chunks, jobs) = (history.transactions, history.jobs)
        func array(_ values: [String]) -> String { "{" + values.joined(separator: ",") + "}" }
        let releases = history.releases
        let common = [
            ("app", history.app), ("chunks", "\(chunks)"), ("jobs", "\(jobs)"), ("end_epoch", "\(end)"),
            ("days", "\(history.days)"), ("release_days", array(releases.map { "\(history.days - $0.daysAgo)" })),
            ("release_os", array(releases.map { "\($0.minimumOS)" })), ("release_versions", array(releases.map(\.version))),
        ]
        log("bulk load: \(history.description), \(chunks) transactions, \(jobs) at a time")
        var started = Date()
        let outputs = (0..<jobs).map { bench.path("\(history.files)load-\($0).txt") }
        let processes = try (0..<jobs).map { job in
            let variables = (common + history.variables + [("job", "\(job)")]).flatMap { ["-v", "\($0)=\($1)"] }
            return try Processes.start(
                Command("psql", [
                    "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", bench.database.description,
                ] + variables + ["-f", bench.environment.script(history.script)],
                environment: ["PGOPTIONS": "-c synchronous_commit=on"]),
                what: "bulk load \(job)", stdout: .file(outputs[job]), stderr: .append(outputs[job]))
        }
        let statuses = processes.map { $0.wait() }
        let texts = outputs.map { (try? String(contentsOfFile: $0, encoding: .utf8)) ?? "" }
        guard statuses.allSatisfy({ $0 == 0 }) else {
            FileHandle.standardError.write(Data(texts.joined().utf8))
            throw BenchFailure("the bulk load failed (output: \(bench.path("\(history.files)load-*.txt")))")
        }
        let seconds = Date().timeIntervalSince(started)
        let loaded = BulkLoadOutput.events(texts)
        let expected = try history.expectedEvents ?? bench.sqlInteger("SELECT count(*) FROM event_log WHERE install_id IS NOT NULL")
        guard loaded == expected else { throw BenchFailure("the load wrote \(loaded) events, not \(expected)") }
        log("loaded \(loaded) events in \(Format.fixed(seconds, 1)) s; VACUUM (ANALYZE) event_log, CHECKPOINT")
        started = Date()
        _ = try bench.sql("VACUUM (ANALYZE) event_log")
        let vacuumSeconds = Date().timeIntervalSince(started)
        bench.checkpoint()
        let total = try bench.countEvents()
        let size = try bench.sqlValue("""
            SELECT pg_size_pretty(sum(pg_total_relation_size(inhrelid))) FROM pg_inherits
            WHERE inhparent = 'event_log'::regclass
            """)
        try bench.sql("SELECT type, count(*) FROM event_log GROUP BY type ORDER BY 2 DESC")
            .write(toFile: bench.path("\(history.files)load-types.txt"), atomically: true, encoding: .utf8)
        return ProjectionsSummary.BulkLoad(
            events: loaded, seconds: seconds, transactions: chunks, jobs: jobs, vacuumSeconds: vacuumSeconds,
            logSize: size, eventsInLog: total)
    }

    // MARK: catch-up

    /// The active projections, and when each reached `total` events.
    func progress(reaching total: Int) throws -> [ProjectionProgress] {
        try ProjectionProgress.parse(bench.sql("""
            SELECT name, events, CASE WHEN events >= \(total) THEN extract(epoch FROM updated_at) ELSE 0 END
            FROM projections WHERE state = 'active' ORDER BY name
            """, separator: " "))
    }

    struct CatchUpRun {
        var server: Server
        var sampler: RSSSampler
        var figures: CatchUp
        var start: Double
        var end: Double
        var cpu: String
        var serverCPUSeconds: Double
    }

    /// Starts `upshift serve` on the loaded log and waits until every projection has applied all `total`
    /// events. Its raw outputs go to files named with the prefix `files`.
    func catchUp(total: Int, files: String) throws -> CatchUpRun {
        let progressFile = bench.path("\(files)catch-up.txt")
        _ = FileManager.default.createFile(atPath: progressFile, contents: nil)
        let cpuBefore = try bench.cpuTicks()
        let start = Date().timeIntervalSince1970
        let server = try bench.startServer(log: bench.path("\(files)serve.log"), settings: Self.noRateLimit)
        let sampler = RSSSampler(pid: server.process.pid, file: bench.path("\(files)rss.txt"))
        let expected = ProjectionName.allCases.count
        log("catch-up: upshift serve \(server.process.pid) applies \(total) events to \(expected) projections")
        var caughtUpAt: [String: Double] = [:]
        var lastSum = -1
        var lastSteps = -1
        var lastChange = Date().timeIntervalSince1970
        var lastReport = 0.0
        var rows: [ProjectionProgress] = []
        while true {
            guard server.process.isRunning else {
                printTail(of: server.log, lines: 30)
                throw BenchFailure("upshift serve exited during catch-up")
            }
            let now = Date().timeIntervalSince1970
            rows = try progress(reaching: total)
            for row in rows where caughtUpAt[row.name] == nil {
                if let at = row.caughtUpAt { caughtUpAt[row.name] = at }
            }
            if now - lastReport >= 9.5 {
                lastReport = now
                let line = CatchUp.progressLine(
                    clock: Format.clock(Date()), elapsed: now - start, progress: rows, total: total)
                bench.note(line, to: progressFile)
                FileHandle.standardError.write(Data((line + "\n").utf8))
            }
            if rows.count >= expected && rows.allSatisfy({ $0.caughtUpAt != nil }) { break }
            // Progress: events applied, or (asked only when no event was for a while) a set-based
            // catch-up's steps committed, since it applies no event until it ends.
            let sum = rows.map(\.events).reduce(0, +)
            if sum != lastSum {
                lastSum = sum
                lastChange = now
            } else if now - lastChange >= 119.5 {
                let steps = try bench.sqlInteger("SELECT coalesce(sum(backfill_steps), 0) FROM projections")
                guard steps != lastSteps else {
                    printTail(of: server.log, lines: 30)
                    throw BenchFailure("no projection progress for 120 s (progress: \(progressFile), server log: \(server.log))")
                }
                lastSteps = steps
                lastChange = now
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
        let end = Date().timeIntervalSince1970
        let cpu = cpuBefore.busyShare(until: try bench.cpuTicks())
        let serverCPU = try bench.processUsage(server.process.pid).cpuSeconds
        let figures = CatchUp(events: total, start: start, caughtUpAt: caughtUpAt)
        bench.note("caught up: " + rows.map { "\($0.name) \($0.events) \($0.caughtUpAt.map { Format.fixed($0, 6) } ?? "0")" }
            .joined(separator: " "), to: progressFile)
        for projection in figures.projections {
            bench.note(
                "\(projection.name) \(Format.fixed(projection.seconds, 2)) \(Format.fixed(projection.eventsPerSecond, 0))",
                to: progressFile)
        }
        log("caught up in \(Format.fixed(figures.seconds, 2)) s (\(Format.fixed(figures.eventsPerSecond, 0)) events/s)")
        let status = bench.path("\(files)projections-status.txt")
        _ = try? Processes.run(
            Command(bench.environment.upshift, ["projections", "status"], environment: ["DATABASE_URL": bench.database.description]),
            stdout: .file(status), stderr: .append(status))
        if let tables = try? bench.sql("""
            SELECT c.relname, pg_size_pretty(pg_total_relation_size(c.oid)), c.reltuples::bigint
            FROM pg_class c WHERE c.relkind = 'r' AND EXISTS (SELECT 1 FROM projections p
                WHERE p.state = 'active' AND c.relname ~ ('_g' || p.generation || '$')) ORDER BY 1
            """) {
            try? tables.write(toFile: bench.path("\(files)projection-tables.txt"), atomically: true, encoding: .utf8)
        }
        return CatchUpRun(
            server: server, sampler: sampler, figures: figures, start: start, end: end, cpu: cpu, serverCPUSeconds: serverCPU)
    }

    /// The adoption projection against the log: per version, installs of `app` whose last event of the
    /// (UTC) day of `day` carried it: "day installs-in-log installs-projected versions-differing".
    func spotCheck(app: String, day: Date) -> String {
        do {
            let generation = try bench.sqlInteger(
                "SELECT generation FROM projections WHERE name = 'adoption' AND state = 'active'")
            let day = PsqlOutput.quoted(Format.day(day))
            let app = PsqlOutput.quoted(app)
            return try bench.sql("""
                WITH truth AS (
                    SELECT version, count(*) AS installs FROM (
                        SELECT DISTINCT ON (install_id) install_id, app_version AS version FROM event_log
                        WHERE app_id = \(app) AND platform = 'ios' AND install_id IS NOT NULL
                          AND occurred_at >= \(day)::date AND occurred_at < \(day)::date + 1
                        ORDER BY install_id, occurred_at DESC, tx_id DESC, position DESC) AS last
                    GROUP BY version),
                projected AS (
                    SELECT version, installs FROM adoption_daily_g\(generation)
                    WHERE app_id = \(app) AND platform = 'ios' AND day = \(day))
                SELECT \(day), coalesce(sum(t.installs), 0), coalesce(sum(p.installs), 0),
                       count(*) FILTER (WHERE t.installs IS DISTINCT FROM p.installs)
                FROM truth t FULL JOIN projected p USING (version)
                """, separator: " ").trimmingCharacters(in: .whitespacesAndNewlines)
        } catch {
            return "failed: \(error)"
        }
    }

    // MARK: reports

    /// A report measured by wrk: the paths its requests go through in turn (each answer read afresh), and
    /// whether it is a dashboard page (signed in with a session cookie) rather than the API. With
    /// `bodies` (one per path) each request is a POST of that JSON body.
    struct ReportCase {
        var name: String
        var paths: [String]
        var page = false
        var bodies: [String]? = nil

        /// The lines of the paths file projections-report.lua reads: `path`, or `path<TAB>body`.
        var lines: [String] {
            guard let bodies else { return paths }
            return zip(paths, bodies).map { "\($0)\t\($1)" }
        }
    }

    /// The report cases: adoption over 90 days; each release's report; the prompts of every target and of
    /// all; the minimum impact of each release as the minimum over windows of 1 to 90 days; the dashboard's
    /// release page of each release.
    func reportCases() -> [ReportCase] {
        let from = Format.day(Date(timeIntervalSince1970: Double(end - 90 * 86400)))
        let to = Format.day(Date(timeIntervalSince1970: Double(end)))
        let app = Self.app
        let releases = Self.releaseDaysAgo.indices.map { "1.\($0).0" }
        let windows = [1, 3, 7, 14, 30, 90]
        return [
            ReportCase(name: "adoption", paths: ["/v1/apps/\(app)/reports/adoption?platform=ios&from=\(from)&to=\(to)"]),
            ReportCase(name: "release", paths: releases.map { "/v1/apps/\(app)/reports/releases/\($0)?platform=ios" }),
            ReportCase(
                name: "prompts",
                paths: ["/v1/apps/\(app)/reports/prompts?platform=ios"]
                    + releases.map { "/v1/apps/\(app)/reports/prompts?platform=ios&targetVersion=\($0)" }),
            ReportCase(
                name: "minimum-impact",
                paths: releases.enumerated().map { index, version in
                    "/v1/apps/\(app)/reports/minimum-impact?platform=ios&version=\(version)&window=\(windows[index % windows.count])"
                }),
            ReportCase(
                name: "dashboard-release", paths: releases.map { "/dashboard/apps/\(app)/releases/\($0)?platform=ios" },
                page: true),
            backtestCase(),
        ]
    }

    /// The policy backtest of changes a rollout owner makes, over windows of 7, 30 and 90 days:
    /// a minimum raised to each release, a release blocked, and the newest release's rollout set to a
    /// partial percentage (where each install's bucket matters).
    func backtestCase() -> ReportCase {
        let releases = Self.releaseDaysAgo.indices.map { "1.\($0).0" }
        let newest = releases[releases.count - 1]
        let changes =
            releases.dropFirst(3).map { #"{"policy":{"enabled":true,"minimumVersion":"\#($0)"}}"# }
            + releases.dropFirst(5).dropLast().map { #"{"policy":{"enabled":true,"blockedVersions":["\#($0)"]}}"# }
            + [5, 20, 50].map { #"{"releases":{"\#(newest)":{"rolloutPercent":\#($0)}}}"# }
        let windows = [7, 30, 90]
        let requests = changes.indices.map { index in
            (path: "/v1/apps/\(Self.app)/preview?platform=ios&window=\(windows[index % windows.count])", body: changes[index])
        }
        return ReportCase(name: "backtest", paths: requests.map(\.path), bodies: requests.map(\.body))
    }

    /// A dashboard session for `token` (`upshift_session=…`), signed in as a browser does.
    private func signIn(_ server: Server, token: String) throws -> String {
        let headers = try Processes.output(
            Command("curl", [
                "-sS", "--max-time", "30", "-o", "/dev/null", "-D", "-", "--data-urlencode", "token=\(token)",
                server.url + "/dashboard/sign-in",
            ]))
        guard let line = headers.split(whereSeparator: \.isNewline).first(where: { $0.lowercased().hasPrefix("set-cookie: upshift_session=") }),
            let pair = line.dropFirst("set-cookie: ".count).split(separator: ";").first
        else { throw BenchFailure("signing in to the dashboard gave no session cookie: \(headers)") }
        return String(pair)
    }

    /// Each report: its first answer timed with curl, then wrk on one connection for `reportDuration` s,
    /// going through its paths in turn.
    private func reports(_ server: Server, token: String) throws -> [ProjectionsSummary.Report] {
        let firstRequests = bench.path("reports.txt")
        _ = FileManager.default.createFile(atPath: firstRequests, contents: nil)
        let cookie = try signIn(server, token: token)
        return try reportCases().map { report in
            let (name, path) = (report.name, report.paths[0])
            let answer = bench.path("report-\(name).\(report.page ? "html" : "json")")
            let credential = report.page ? ["-H", "Cookie: \(cookie)"] : ["-H", "Authorization: Bearer \(token)"]
            let body = report.bodies.map { ["-H", "Content-Type: application/json", "--data-binary", $0[0]] } ?? []
            let first = (try? Processes.output(
                Command("curl", ["-sS", "--max-time", "60", "-o", answer, "-w", "%{http_code} %{time_total}"] + credential
                    + body + [server.url + path]))) ?? "000 -"
            let fields = first.split(separator: " ").map(String.init)
            let status = Int(fields.first ?? "") ?? 0
            let seconds = fields.count > 1 ? fields[1] : "-"
            bench.note("GET \(path) -> \(first) s (first request)", to: firstRequests)
            let paths = bench.path("report-\(name)-paths.txt")
            try (report.lines.joined(separator: "\n") + "\n").write(toFile: paths, atomically: true, encoding: .utf8)
            log("report \(name): first answer \(status) in \(seconds) s; wrk, 1 connection, \(reportDuration)s over \(report.paths.count) paths")
            let out = bench.path("report-\(name)-wrk.txt")
            var environment = ["UPSHIFT_BENCH_PATHS": paths]
            if report.page { environment["UPSHIFT_BENCH_COOKIE"] = cookie } else { environment["UPSHIFT_BENCH_TOKEN"] = token }
            let wrkStatus = try Processes.run(
                Command("wrk", [
                    "-t", "1", "-c", "1", "-d", "\(reportDuration)s", "--timeout", "10s", "--latency",
                    "-s", bench.environment.script("projections-report.lua"), server.url + path,
                ], environment: environment),
                stdout: .file(out), stderr: .append(out))
            guard wrkStatus == 0 else {
                printTail(of: out, lines: 40)
                throw BenchFailure("wrk failed for report \(name) (output: \(out))")
            }
            let run = try ReportRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))
            let bytes = (try? FileManager.default.attributesOfItem(atPath: answer)[.size] as? Int) ?? 0
            return ProjectionsSummary.Report(
                name: name, run: run, firstStatus: status, firstSeconds: seconds, bytes: bytes, paths: report.paths.count)
        }
    }

    // MARK: live load and lag

    private struct LiveLoad {
        var figures: ProjectionsSummary.Live
        var start: Double
        var end: Double
    }

    /// How long the live load runs: `lagDuration`, or longer when the reports measured during it need it.
    var liveSeconds: Int {
        max(lagDuration, 10 + reportCases().count * (reportDuration + 3))
    }

    /// 2,000 events/s through POST /v1/events for ``liveSeconds`` while the lag sampler runs; `during`
    /// runs 5 s into it (the reports), and its value is returned with the live run's figures.
    private func live<T>(_ server: Server, key: String, during: () throws -> T) throws -> (LiveLoad, T) {
        let pool = bench.path("live-installs.csv")
        let out = bench.path("live-wrk.txt")
        let samples = bench.path("lag-samples.txt")
        let osArray = PsqlOutput.quoted("{" + Self.releaseOS.map(String.init).joined(separator: ",") + "}")
        // Installs seen in the last 3 days, each with its latest version, OS and locale, and the newest
        // release its OS runs.
        _ = try bench.psql(["-c", """
            \\copy (SELECT install_id, app_version, coalesce(os, ''), coalesce(locale, ''), '1.' || greatest(width_bucket(coalesce(split_part(os, '.', 1)::int, 99), \(osArray)::int[]) - 1, 0) || '.0' FROM (SELECT DISTINCT ON (install_id) install_id, app_version, data->>'osVersion' AS os, data->>'locale' AS locale FROM event_log WHERE install_id IS NOT NULL AND occurred_at > now() - interval '3 days' ORDER BY install_id, occurred_at DESC) AS i ORDER BY random() LIMIT 20000) TO \(PsqlOutput.quoted(pool)) WITH (FORMAT csv)
            """])
        let poolSize = (try? FileManager.default.attributesOfItem(atPath: pool)[.size] as? Int) ?? 0
        guard poolSize > 0 else { throw BenchFailure("no recent installs to post events for") }
        let before = try bench.countEvents()
        let cpuBefore = try bench.cpuTicks()
        let sampler = try startLagSampler(writingTo: samples, errors: bench.path("lag-sampler.err"))
        Thread.sleep(forTimeInterval: 1)
        guard sampler.isRunning else {
            printTail(of: bench.path("lag-sampler.err"), lines: 30)
            throw BenchFailure("the lag sampler failed")
        }
        log("live: \(Self.liveEventsPerRequest) events x \(Self.liveRequestsPerSecond) requests/s for \(liveSeconds)s, lag sampled every 200 ms")
        let start = Date().timeIntervalSince1970
        let load = try startLiveLoad(server, key: key, seconds: liveSeconds, installs: pool, output: out)
        Thread.sleep(forTimeInterval: 5)
        let measured = try during()
        let status = load.wait()
        let end = Date().timeIntervalSince1970
        _ = sampler.stop()
        let cpu = cpuBefore.busyShare(until: try bench.cpuTicks())
        guard status == 0 else {
            printTail(of: out, lines: 40)
            throw BenchFailure("wrk failed in the live run (output: \(out))")
        }
        // How the sampler's query for one projection runs (it should scan the feed index from the checkpoint).
        _ = try? Processes.run(
            Command("psql", ["-X", "-q", "-A", "-t", "-d", bench.database.description]),
            stdout: .file(bench.path("lag-explain.txt")), stderr: .append(bench.path("lag-explain.txt")), stdin: """
                SELECT last_tx, last_pos FROM projections WHERE name = 'install_state' AND state = 'active' \\gset
                EXPLAIN (ANALYZE, BUFFERS) SELECT coalesce(extract(epoch FROM now() - min(recorded_at)), 0)::float8, count(*)
                FROM event_log WHERE (tx_id, position) > (:'last_tx'::xid8, :last_pos);
                """)
        let run = try LiveRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))
        let drain = try waitUntilCounted(limit: 120)
        let rows = try bench.countEvents() - before
        let lag = LagSummary(
            LagSample.parse((try? String(contentsOfFile: samples, encoding: .utf8)) ?? ""), from: start, to: end)
        return (
            LiveLoad(
                figures: ProjectionsSummary.Live(run: run, cpu: cpu, lag: lag, rowsStored: rows, drainSeconds: drain),
                start: start, end: end),
            measured
        )
    }

    private struct RebuildUnderLoad {
        var figures: ProjectionsSummary.RebuildUnderLoad
        var start: Double
        var end: Double
    }

    /// `upshift projections rebuild NAME` from zero over the whole log, started 5 s into a second live load
    /// of ``rebuildDuration`` seconds, while the lag of the active generations (the rebuilt projection's
    /// current one included) is sampled.
    private func rebuildUnderLoad(_ projection: ProjectionName, server: Server, key: String) throws -> RebuildUnderLoad {
        let rebuildOut = bench.path("rebuild-live.txt")
        log("rebuild under load: \(Self.liveEventsPerRequest) events x \(Self.liveRequestsPerSecond) requests/s for \(rebuildDuration)s; upshift projections rebuild \(projection.rawValue) 5 s in")
        var status: Int32 = 0
        let loaded = try underLoad("rebuild", seconds: rebuildDuration, server: server, key: key) {
            let rebuild = try Processes.start(
                Command(bench.environment.upshift, ["projections", "rebuild", projection.rawValue], environment: [
                    "DATABASE_URL": bench.database.description, "UPSHIFT_MIGRATIONS_DIR": bench.environment.migrations,
                ]), what: "upshift projections rebuild", stdout: .file(rebuildOut), stderr: .append(rebuildOut))
            status = rebuild.wait()
        }
        let figures = ProjectionsSummary.RebuildUnderLoad(
            projection: projection.rawValue, seconds: loaded.end - loaded.start, exitStatus: status, lag: loaded.lag,
            eventsPerSecond: loaded.run.events.perSecond, non2xx: loaded.run.non2xx, loadSeconds: rebuildDuration)
        log("rebuild under load: \(projection.rawValue) in \(Format.fixed(loaded.end - loaded.start, 1)) s, exit \(status); lag p99 \(loaded.lag.p99.map { Format.fixed($0, 3) } ?? "-") s")
        return RebuildUnderLoad(figures: figures, start: loaded.start, end: loaded.end)
    }

    /// `--erase N`: N installs of the log erased (`upshift installs forget`, one request each) 5 s into a third
    /// live load of ``rebuildDuration`` seconds, timed from the first request until every one is done, while
    /// the lag of the projections is sampled as before.
    private func eraseUnderLoad(_ count: Int, server: Server, key: String) throws -> ProjectionsSummary.ErasureUnderLoad {
        let installs = try bench.sqlValue(
            "SELECT string_agg(install_id::text, ',') FROM (SELECT DISTINCT install_id FROM event_log WHERE install_id IS NOT NULL LIMIT \(count)) i"
        ).split(separator: ",").map(String.init)
        let events = try bench.sqlInteger(
            "SELECT count(*) FROM event_log WHERE install_id = ANY('{\(installs.joined(separator: ","))}'::uuid[])")
        log("erasure under load: \(installs.count) installs (\(events) events) 5 s into \(rebuildDuration)s of live load")
        let environment = ["DATABASE_URL": bench.database.description, "UPSHIFT_MIGRATIONS_DIR": bench.environment.migrations]
        var done: Double?
        let loaded = try underLoad("erase", seconds: rebuildDuration, server: server, key: key) {
            for install in installs {
                let status = try Processes.run(
                    Command(bench.environment.upshift, ["installs", "forget", "--app", Self.app, "--install", install], environment: environment),
                    stdout: .append(bench.path("erase.txt")), stderr: .append(bench.path("erase.txt")))
                guard status == 0 else { throw BenchFailure("upshift installs forget exited \(status) (output: \(bench.path("erase.txt")))") }
            }
            let requested = Date().timeIntervalSince1970
            while Date().timeIntervalSince1970 - requested < 1_800 {
                if try bench.sqlInteger("SELECT count(*) FROM erasures WHERE done_at IS NULL") == 0 {
                    done = Date().timeIntervalSince1970
                    break
                }
                Thread.sleep(forTimeInterval: 0.2)
            }
        }
        let seconds = done.map { $0 - loaded.start }
        // The live load may post events of these installs meanwhile: new data, which stays.
        let left = try bench.sqlInteger(
            "SELECT count(*) FROM event_log WHERE install_id = ANY('{\(installs.joined(separator: ","))}'::uuid[]) AND recorded_at < to_timestamp(\(loaded.start))")
        log("erasure under load: " + (seconds.map { "done in \(Format.fixed($0, 1)) s" } ?? "not done within 30 minutes") + "; \(left) of their events from before the requests left in the log")
        return ProjectionsSummary.ErasureUnderLoad(
            installs: installs.count, events: events, seconds: seconds, eventsLeft: left, lag: loaded.lag,
            eventsPerSecond: loaded.run.events.perSecond, non2xx: loaded.run.non2xx, loadSeconds: rebuildDuration)
    }

    /// A live load of `seconds` (2,000 events/s, as the first) with the lag sampled, and `action` run 5 s into
    /// it: the load's figures, and the lag from the action's start to its end (or the load's, when it
    /// outlasts it).
    private func underLoad(
        _ name: String, seconds: Int, server: Server, key: String, action: () throws -> Void
    ) throws -> (run: LiveRun, lag: LagSummary, start: Double, end: Double) {
        let pool = bench.path("live-installs.csv")
        let out = bench.path("\(name)-live-wrk.txt")
        let samples = bench.path("\(name)-lag-samples.txt")
        let sampler = try startLagSampler(writingTo: samples, errors: bench.path("\(name)-lag-sampler.err"))
        let load = try startLiveLoad(server, key: key, seconds: seconds, installs: pool, output: out)
        Thread.sleep(forTimeInterval: 5)
        let start = Date().timeIntervalSince1970
        try action()
        let end = Date().timeIntervalSince1970
        let loadStatus = load.wait()
        _ = sampler.stop()
        guard loadStatus == 0 else {
            printTail(of: out, lines: 40)
            throw BenchFailure("wrk failed during the \(name) under load (output: \(out))")
        }
        let run = try LiveRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))
        // The requests in flight when wrk stopped are still stored and applied: the final count waits
        // for them, as after the first live run.
        let drain = try waitUntilCounted(limit: 120)
        log("\(name) under load: " + (drain.map { "all counted \(Format.fixed($0, 1)) s after wrk stopped" } ?? "not all counted 120 s after wrk stopped"))
        let lag = LagSummary(
            LagSample.parse((try? String(contentsOfFile: samples, encoding: .utf8)) ?? ""), from: start,
            to: min(end, start + Double(seconds) - 5))
        return (run, lag, start, end)
    }

    /// The lag sampler (scripts/bench.d/projections-lag.sql), until stopped.
    private func startLagSampler(writingTo samples: String, errors: String) throws -> RunningProcess {
        try Processes.start(
            Command("psql", [
                "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", bench.database.description,
                "-f", bench.environment.script("projections-lag.sql"),
            ], environment: ["PGOPTIONS": "-c synchronous_commit=on"]),
            what: "lag sampler", stdout: .file(samples), stderr: .file(errors))
    }

    /// The live load: 2,000 events/s through POST /v1/events for `seconds`, from the installs of `installs`.
    private func startLiveLoad(_ server: Server, key: String, seconds: Int, installs: String, output: String) throws
        -> RunningProcess
    {
        try Processes.start(
            Command("wrk", [
                "-t", "2", "-c", "8", "-d", "\(seconds)s", "--timeout", "10s", "--latency",
                "-s", bench.environment.script("projections-events.lua"), server.url + "/v1/events", "--",
                "\(Self.liveEventsPerRequest)", "\(Self.liveRequestsPerSecond)", "2", installs,
            ], environment: ["UPSHIFT_BENCH_KEY": key]),
            what: "live load", stdout: .file(output), stderr: .append(output))
    }

    /// Seconds until every active projection has applied every event in the log; nil after `limit` s.
    private func waitUntilCounted(limit: Double) throws -> Double? {
        let started = Date()
        while true {
            let behind = try progress(reaching: bench.countEvents()).filter { $0.caughtUpAt == nil }
            let elapsed = Date().timeIntervalSince(started)
            if behind.isEmpty { return elapsed }
            if elapsed >= limit { return nil }
            Thread.sleep(forTimeInterval: 0.2)
        }
    }

    // MARK: rebuild

    /// `upshift projections rebuild NAME` with the server stopped: set-based, or `--in-batches` (the fold).
    private func rebuild(_ projection: ProjectionName, inBatches: Bool) throws -> ProjectionsSummary.Rebuild {
        let name = "rebuild-\(projection.rawValue)\(inBatches ? "-in-batches" : "")"
        let out = bench.path("\(name).txt")
        let arguments = ["projections", "rebuild", projection.rawValue] + (inBatches ? ["--in-batches"] : [])
        log("rebuild: upshift \(arguments.joined(separator: " ")) (server stopped)")
        let started = Date()
        let process = try Processes.start(
            Command(bench.environment.upshift, arguments, environment: [
                "DATABASE_URL": bench.database.description, "UPSHIFT_MIGRATIONS_DIR": bench.environment.migrations,
            ]), what: "upshift projections rebuild", stdout: .file(out), stderr: .append(out))
        let sampler = RSSSampler(pid: process.pid, file: bench.path("\(name)-rss.txt"))
        let status = process.wait()
        sampler.stop()
        let seconds = Date().timeIntervalSince(started)
        let rss = RSSSamples(parsing: (try? String(contentsOfFile: bench.path("\(name)-rss.txt"), encoding: .utf8)) ?? "")
        var failure: String?
        if status != 0 {
            let lines = ((try? String(contentsOfFile: out, encoding: .utf8)) ?? "").split(separator: "\n")
            failure = String(lines.first { $0.lowercased().contains("error") } ?? lines.last ?? "exit status \(status)")
            log("projections rebuild failed (exit \(status)): \(failure ?? "")")
        }
        return ProjectionsSummary.Rebuild(
            projection: projection.rawValue, seconds: seconds, events: try bench.countEvents(), peakRSSMiB: rss.peakMiB(),
            failure: failure)
    }
}
