import ArgumentParser
import BenchmarkKit
import Dispatch
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `scripts/bench catalog`.
struct Catalog: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "A catalog of 1,000 apps, one written every 100 ms, while checks over 100 others run on two instances.",
        discussion: """
            A write must cost the app it changed. Passes when every write reaches the other \
            instance's check within 1 s and the other apps' answers are found in the cache at least 99 % of the time.
            """)

    @Option(help: "Seconds of writes.")
    var duration = 60

    func validate() throws {
        guard duration > 0 else { throw ValidationError("--duration must be a whole number of seconds above 0") }
    }

    func run() throws {
        try BenchmarkRun.run("catalog") { bench in
            try CatalogBenchmark(bench: bench, duration: duration).run()
        }
    }
}

struct CatalogBenchmark {
    let bench: Bench
    let duration: Int

    static let apps = 1_000
    static let releasesPerApp = 50
    /// The app written: `app0000`. The checks ask about 100 others, two versions each.
    static let written = "app0000"
    static let questionApps = 100

    static func appId(_ index: Int) -> String { "app" + String(format: "%04d", index) }

    func run() throws -> Summary {
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        try prepareCatalog()
        let admin = try bench.createKey(["--scope", "admin", "--name", "bench-catalog"])
        let durability = try bench.durability()
        let postgres = try bench.sqlValue("SHOW server_version")

        let settings = ["UPSHIFT_CHECK_RATE_LIMIT": "0", "UPSHIFT_ROLES": "http"]
        let a = try bench.startServer(log: bench.path("a-serve.log"), settings: settings)
        let b = try bench.startServer(log: bench.path("b-serve.log"), settings: settings)
        let paths = (1...Self.questionApps).flatMap { index in
            ["1.0.20", "1.0.40"].map { "/v1/apps/\(Self.appId(index))/check?platform=ios&version=\($0)" }
        }
        let pathsFile = bench.path("check-paths.txt")
        try Data((paths.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: pathsFile))
        for server in [a, b] {
            for path in paths { _ = try HTTP.send("GET", server.url + path) }  // the answers cached
        }
        let before = try [a, b].map { try Self.cacheLookups($0) }

        var loads: [(RunningProcess, String)] = []
        for (tag, server) in [("a", a), ("b", b)] {
            let out = bench.path("\(tag)-checks-wrk.txt")
            loads.append((
                try Processes.start(
                    Command("wrk", [
                        "-t", "1", "-c", "4", "-d", "\(duration)s", "--timeout", "5s", "--latency",
                        "-s", bench.environment.script("projections-report.lua"), server.url + paths[0],
                    ], environment: ["UPSHIFT_BENCH_TOKEN": "none", "UPSHIFT_BENCH_PATHS": pathsFile, "UPSHIFT_BENCH_PACE_MS": "20"]),
                    what: "wrk (checks, \(tag))", stdout: .file(out), stderr: .append(out)),
                out))
        }
        log("checks: \(paths.count) questions over \(Self.questionApps) apps on both instances, about 200/s each; writes to \(Self.written) through A every 100 ms for \(duration) s")

        // The writes: the minimum alternates between 1.0.30 and 1.0.10, so a check of 1.0.20 is forced or not.
        let probe = "/v1/apps/\(Self.written)/check?platform=ios&version=1.0.20"
        var propagation: [Double?] = []
        var probes = 0
        var revision = 0
        let begin = Date()
        var next = begin
        while Date().timeIntervalSince(begin) < Double(duration) {
            let forced = revision % 2 == 0
            let body = #"{"enabled": true, "minimumVersion": "\#(forced ? "1.0.30" : "1.0.10")"}"#
            let written = try HTTP.send(
                "PUT", a.url + "/v1/apps/\(Self.written)/policies/ios", body: body,
                headers: ["Authorization": "Bearer \(admin)", "Content-Type": "application/json", "If-Match": "\"\(revision)\""])
            guard written.status == 200 else {
                throw BenchFailure("PUT of the policy answered \(written.status): \(String(decoding: written.body, as: UTF8.self))")
            }
            revision += 1
            let wrote = Date()
            var seen: Double?
            while seen == nil, Date().timeIntervalSince(wrote) < CatalogSummary.propagationBound {
                let answer = try HTTP.send("GET", b.url + probe)
                probes += 1
                if String(decoding: answer.body, as: UTF8.self).contains(#""action":"force""#) == forced {
                    seen = Date().timeIntervalSince(wrote)
                } else {
                    Thread.sleep(forTimeInterval: 0.005)
                }
            }
            propagation.append(seen)
            next = max(next.addingTimeInterval(0.1), Date())
            Thread.sleep(until: next)
        }
        let seconds = Date().timeIntervalSince(begin)
        var checksPerSecond = 0.0
        var statuses: [String] = []
        for (process, out) in loads {
            guard process.wait() == 0 else { throw BenchFailure("wrk asking checks failed (output: \(out))") }
            let run = try ReportRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))
            checksPerSecond += run.requestsPerSecond
            statuses.append(run.statuses)
        }
        let after = try [a, b].map { try Self.cacheLookups($0) }
        let usages = try [a, b].map { try bench.stop($0) }
        return CatalogSummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgres, durability: durability),
            outputFolder: bench.output, apps: Self.apps, releasesPerApp: Self.releasesPerApp, seconds: seconds,
            questions: paths.count, questionApps: Self.questionApps, propagation: propagation,
            hits: zip(after, before).map { $0.hits - $1.hits }.reduce(0, +),
            misses: zip(after, before).map { $0.misses - $1.misses }.reduce(0, +), probes: probes,
            checksPerSecond: checksPerSecond, checkStatuses: statuses.joined(separator: ","), servers: usages
        ).render()
    }

    /// `upshift_check_cache_lookups_total` of an instance, by result.
    static func cacheLookups(_ server: Server) throws -> (hits: Double, misses: Double) {
        let page = PrometheusText(String(decoding: try HTTP.send("GET", server.url + "/metrics").body, as: UTF8.self))
        return (
            page.sum(#"upshift_check_cache_lookups_total{result="hit"}"#) ?? 0,
            page.sum(#"upshift_check_cache_lookups_total{result="miss"}"#) ?? 0
        )
    }

    /// One app made with the CLI (its 50 releases, one a week back from today), then copied 999 times in
    /// SQL, stream heads included: a catalog as the CLI writes it, in seconds.
    private func prepareCatalog() throws {
        try bench.recreateDatabase("upshift_catalog_bench")
        try bench.upshift(["apps", "create", "--id", Self.written, "--name", "App 0"])
        let now = Date()
        for index in 0..<Self.releasesPerApp {
            try bench.upshift([
                "releases", "add", "--app", Self.written, "--platform", "ios", "--version", "1.0.\(index)",
                "--released-at", Format.iso8601(now.addingTimeInterval(-Double(Self.releasesPerApp - index) * 7 * 86_400)),
            ])
        }
        log("copying \(Self.written) to \(Self.apps - 1) more apps")
        _ = try bench.psql([], stdin: """
            INSERT INTO apps (app_id, name, default_locale, created_at, update_urls, store_ids, bundle_ids, revision)
            SELECT 'app' || lpad(n::text, 4, '0'), 'App ' || n, default_locale, created_at, update_urls, store_ids,
                   bundle_ids, revision
            FROM apps, generate_series(1, \(Self.apps - 1)) n WHERE app_id = '\(Self.written)';
            INSERT INTO releases (app_id, platform, version_key, release, revision)
            SELECT 'app' || lpad(n::text, 4, '0'), platform, version_key, release, revision
            FROM releases, generate_series(1, \(Self.apps - 1)) n WHERE app_id = '\(Self.written)';
            INSERT INTO streams (stream_id, version)
            SELECT 'app:app' || lpad(n::text, 4, '0'), version
            FROM streams, generate_series(1, \(Self.apps - 1)) n WHERE stream_id = 'app:\(Self.written)';
            """)
        let releases = try bench.sqlInteger("SELECT count(*) FROM releases")
        guard releases == Self.apps * Self.releasesPerApp else {
            throw BenchFailure("the catalog holds \(releases) releases, not \(Self.apps * Self.releasesPerApp)")
        }
    }
}

/// Blocking HTTP for the benchmark's own requests (a write, a probe, a metrics page).
enum HTTP {
    struct Reply {
        var status: Int
        var body: Data
        /// Seconds of its `Retry-After`, when it has one.
        var retryAfter: Double?
    }

    static let session = URLSession(configuration: .ephemeral)

    static func send(
        _ method: String, _ url: String, body: String? = nil, headers: [String: String] = [:], session: URLSession = session
    ) throws -> Reply {
        guard let target = URL(string: url) else { throw BenchFailure("not a URL: \(url)") }
        var request = URLRequest(url: target, timeoutInterval: 10)
        request.httpMethod = method
        for (name, value) in headers { request.setValue(value, forHTTPHeaderField: name) }
        request.httpBody = body.map { Data($0.utf8) }
        let done = DispatchSemaphore(value: 0)
        nonisolated(unsafe) var result: Result<Reply, any Error> = .failure(BenchFailure("no answer from \(url)"))
        session.dataTask(with: request) { data, response, error in
            if let error {
                result = .failure(BenchFailure("\(method) \(url): \(error)"))
            } else {
                let response = response as? HTTPURLResponse
                result = .success(Reply(
                    status: response?.statusCode ?? 0, body: data ?? Data(),
                    retryAfter: response?.value(forHTTPHeaderField: "Retry-After").flatMap(Double.init)))
            }
            done.signal()
        }.resume()
        done.wait()
        return try result.get()
    }
}
