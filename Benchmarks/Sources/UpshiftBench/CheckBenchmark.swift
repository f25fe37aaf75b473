import BenchmarkKit
import Foundation

/// `scripts/bench check`: (a) nginx and (b) `upshift bench-static` serving the bytes of one check answer,
/// (c) the check without install, (d) with a distinct install per request, (e) memory under junk.
struct CheckBenchmark {
    let bench: Bench
    let duration: Int

    /// The check whose answer (a) and (b) serve: a mid version, OS and locale of the catalog below.
    static let path = "/v1/apps/bench/check"
    static let query = "platform=ios&version=3.9.0&os=16.4&locale=de"
    static let bodyFile = "check-body.json"
    static let connections = 64
    /// (c), (d) and (e) run the check as an instance of the `http` role serves it (docs/OPERATIONS.md,
    /// deployment), as the ingestion benchmark does: with the `projections` role too, the same process would
    /// fold every `checked` event of (d) into the read models (the projections have their own benchmark).
    static let serverSettings = ["UPSHIFT_CHECK_RATE_LIMIT": "0", "UPSHIFT_ROLES": "http"]
    static let roles = "http for (c), (d) and (e): the check as an instance of that role serves it (docs/OPERATIONS.md, deployment; the projections, which fold each checked event of (d), have their own benchmark)"

    func run() throws -> Summary {
        let nginx = try nginxPath()
        if duration < CheckSummary.shortestCountingDuration {
            log("a run under \(CheckSummary.shortestCountingDuration) s per case is a smoke test: its figures do not count")
        }
        try bench.recreateDatabase("upshift_bench_check")
        try createCatalog()
        let started = Format.utcStamp(Date())
        let machine = bench.machine()
        let durability = try bench.durability()
        let postgres = try bench.sqlValue("SHOW server_version")
        let body = try captureBody()
        let fixedURL = "\(Self.path)?\(Self.query)"

        // (a) nginx, static file.
        var reference = try startNginx(nginx)
        let a = try wrk("a", url: reference.url + fixedURL, mode: "fixed")
        _ = reference.process.stop()

        // (b) the trivial Hummingbird route, then paced at half its rate.
        reference = try startStatic(body: bench.environment.root + "/.bench/" + Self.bodyFile)
        let b = try wrk("b", url: reference.url + fixedURL, mode: "fixed")
        let bPaced = try wrk("b-paced", url: reference.url + fixedURL, mode: "fixed", pacedAfter: b)
        _ = reference.process.stop()

        // (c) the check without install, then paced at half its rate.
        var server = try bench.startServer(log: bench.path("c-serve.log"), settings: Self.serverSettings)
        let c = try wrk("c", url: server.url + Self.path, mode: "vary")
        let cPaced = try wrk("c-paced", url: server.url + Self.path, mode: "vary", pacedAfter: c)
        let cServer = try stop(server, tag: "c")

        // (d) a distinct install per request: every answered check is stored as a "checked" event.
        try bench.resetEvents()
        server = try bench.startServer(log: bench.path("d-serve.log"), settings: Self.serverSettings)
        let d = try wrk("d", url: server.url + Self.path, mode: "install")
        // Let the last group commit finish, so that a failed flush shows in the metric too.
        Thread.sleep(forTimeInterval: 1)
        let dServer = try stop(server, tag: "d")
        let stored = try PsqlOutput.integers(
            bench.sql("SELECT count(*), count(DISTINCT install_id) FROM event_log WHERE type = 'checked'", separator: " "))
        guard stored.count == 2 else { throw BenchFailure("the count of checked rows printed \(stored)") }
        bench.note("checked rows stored: \(stored[0]) (distinct installs: \(stored[1]))", to: bench.path("d-wrk.txt"))

        // (e) memory: every other request carries about 15 KB of an ignored parameter (the head limit is
        // 16 KiB), the others are distinct valid questions (version, OS, locale, previous) about releases with
        // long notes; the cache has its default budget (64 MiB). Peak RSS against the 200 MB memory target
        // (docs/BENCHMARKS.md, "Performance targets").
        try createNotesCatalog()
        server = try bench.startServer(log: bench.path("e-serve.log"), settings: Self.serverSettings)
        let e = try wrk("e", url: server.url + "/v1/apps/bench-notes/check", mode: "memory")
        let eServer = try stop(server, tag: "e")

        var summary = CheckSummary(
            facts: bench.facts(started: started, machine: machine, postgresVersion: postgres, durability: durability),
            nginxVersion: try nginxVersion(nginx), durationSeconds: duration, connections: Self.connections,
            cpus: bench.cpus, outputFolder: bench.output, body: body, nginx: a, trivialRoute: b, trivialRoutePaced: bPaced,
            check: c, checkPaced: cPaced, checkServer: cServer, checkWithInstall: d, checkWithInstallServer: dServer,
            checkedRows: stored[0], checkedInstalls: stored[1], memory: e, memoryServer: eServer,
            memoryPeakRSSMiB: eServer.usage.peakRSSMiB
        )
        summary.roles = Self.roles
        return summary.render()
    }

    // MARK: the catalogs

    /// App "bench" on ios: 20 releases 3.0.0 ... 4.9.0 released from 200 days to 12 hours ago, minimum OS
    /// rising from 15.0 to 17.0, notes in en, de and fr (2 or 3 lines each); policy minimum 3.2.0, X = 2
    /// days, Z = 1.
    private func createCatalog() throws {
        log("creating the catalog: app bench, 20 ios releases, policy")
        try bench.upshift([
            "apps", "create", "--id", "bench", "--name", "Bench", "--update-url", "ios=https://apps.apple.com/app/id1234567890",
        ])
        let now = Date()
        for i in 0..<20 {
            let released = now.addingTimeInterval(-Double(4800 - i * 252) * 3600)
            var arguments = [
                "releases", "add", "--app", "bench", "--platform", "ios", "--version", "\(3 + i / 10).\(i % 10).0",
                "--released-at", Format.iso8601(released), "--minimum-os", CheckCatalog.minimumOS[i],
            ]
            for k in 0..<(2 + i % 2) {
                let line = (i + 3 * k) % 10
                for (locale, notes) in CheckCatalog.notes { arguments += ["--note", "\(locale)=\(notes[line])"] }
            }
            try bench.upshift(arguments)
        }
        try bench.upshift([
            "policy", "set", "--app", "bench", "--platform", "ios", "--minimum", "3.2.0", "--notify-after-days", "2",
            "--versions-behind", "1", "--reason", "scripts/bench check",
        ])
    }

    /// App "bench-notes" for case (e): 10 ios releases 1.0.0 ... 1.9.0 with long notes (50 lines of 1,000
    /// characters in en and de, the catalog's limits), so that every answer that lists them is large.
    private func createNotesCatalog() throws {
        log("creating the catalog of case (e): app bench-notes, 10 ios releases with long notes")
        try bench.upshift([
            "apps", "create", "--id", "bench-notes", "--name", "Bench notes",
            "--update-url", "ios=https://apps.apple.com/app/id1234567890",
        ])
        let now = Date()
        for i in 0..<10 {
            let version = "1.\(i).0"
            var arguments = [
                "releases", "add", "--app", "bench-notes", "--platform", "ios", "--version", version,
                "--released-at", Format.iso8601(now.addingTimeInterval(-Double(200 - i * 20) * 86400)),
            ]
            for k in 0..<50 {
                let line = CheckCatalog.longNote(version: version, line: k)
                arguments += ["--note", "en=\(line)", "--note", "de=\(line)"]
            }
            try bench.upshift(arguments)
        }
    }

    /// Captures one typical check answer into .bench/check-body.json (and the run's folder).
    private func captureBody() throws -> CheckSummary.Body {
        let file = bench.environment.root + "/.bench/" + Self.bodyFile
        let server = try bench.startServer(log: bench.path("capture-serve.log"), settings: Self.serverSettings)
        let status = try Processes.run(Command("curl", [
            "-fsS", "--max-time", "10", "-D", bench.path("check-body.headers"), "-o", file,
            server.url + Self.path + "?" + Self.query,
        ]))
        _ = server.process.stop()
        guard status == 0 else { throw BenchFailure("GET \(Self.path)?\(Self.query) failed") }
        let files = FileManager.default
        try files.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        try? files.removeItem(atPath: bench.path(Self.bodyFile))
        try files.copyItem(atPath: file, toPath: bench.path(Self.bodyFile))
        let data = try Data(contentsOf: URL(fileURLWithPath: file))
        guard !data.isEmpty else { throw BenchFailure("the check answered an empty body") }
        let answer = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let decision = "\(answer?["action"] as? String ?? "?"), \(answer?["reason"] as? String ?? "?")"
        log("captured \(data.count) bytes (\(decision)) into \(file)")
        return CheckSummary.Body(file: Self.bodyFile, bytes: data.count, decision: decision, path: Self.path, query: Self.query)
    }

    // MARK: the reference servers

    private func nginxPath() throws -> String {
        if let path = try? Processes.resolve("nginx") { return path }
        if FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") { return "/usr/sbin/nginx" }
        throw BenchFailure("nginx is not installed (scripts/bench check installs it)")
    }

    private func nginxVersion(_ nginx: String) throws -> String {
        let file = bench.path("nginx/version.txt")
        try Processes.run(Command(nginx, ["-v"]), stdout: .discard, stderr: .file(file))
        let text = try String(contentsOfFile: file, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.hasPrefix("nginx version: ") ? String(text.dropFirst("nginx version: ".count)) : text
    }

    /// Case (a): our own nginx (not the system service) serving the captured body on every path.
    private func startNginx(_ nginx: String) throws -> Server {
        let folder = bench.path("nginx")
        let port = try bench.freePort()
        try FileManager.default.createDirectory(atPath: folder + "/tmp", withIntermediateDirectories: true)
        let configuration = NginxConfiguration(
            folder: folder, port: port, workers: bench.cpus, root: bench.environment.root + "/.bench", file: Self.bodyFile)
        try configuration.text.write(toFile: folder + "/nginx.conf", atomically: true, encoding: .utf8)
        let process = try Processes.start(
            Command(nginx, ["-p", folder, "-c", folder + "/nginx.conf", "-e", folder + "/error.log"]), what: "nginx",
            stdout: .file(folder + "/stdout.log"), stderr: .append(folder + "/stdout.log"))
        let server = Server(process: process, url: "http://127.0.0.1:\(port)", log: folder + "/error.log")
        try bench.waitReady(process, url: server.url + Self.path, log: server.log)
        try expectCapturedBody(from: server)
        return server
    }

    /// Case (b): the trivial Hummingbird route (`upshift bench-static`).
    private func startStatic(body: String) throws -> Server {
        let port = try bench.freePort()
        let file = bench.path("b-static.log")
        let process = try Processes.start(
            Command(bench.environment.upshift, ["bench-static", "--body", body, "--port", "\(port)"]),
            what: "upshift bench-static", stdout: .file(file), stderr: .append(file))
        let server = Server(process: process, url: "http://127.0.0.1:\(port)", log: file)
        try bench.waitReady(process, url: server.url + Self.path, log: file)
        try expectCapturedBody(from: server)
        return server
    }

    /// A reference server must answer exactly the captured bytes.
    private func expectCapturedBody(from server: Server) throws {
        let answer = try Processes.outputData(
            Command("curl", ["-fsS", "--max-time", "10", server.url + Self.path + "?" + Self.query]))
        let captured = try Data(contentsOf: URL(fileURLWithPath: bench.environment.root + "/.bench/" + Self.bodyFile))
        guard answer == captured else { throw BenchFailure("\(server.url) does not answer the bytes of \(Self.bodyFile)") }
    }

    // MARK: the runs

    /// One wrk run of check.lua in `mode` (fixed, vary, install, memory); paced at half the rate of
    /// `pacedAfter` when given.
    private func wrk(_ tag: String, url: String, mode: String, pacedAfter: CheckSummary.Measured? = nil) throws -> CheckSummary.Measured {
        let out = bench.path("\(tag)-wrk.txt")
        let pace = pacedAfter.map {
            CheckSummary.pace(connections: Self.connections, maxRequestsPerSecond: $0.run.requestsPerSecond)
        }
        log("case (\(tag)): wrk, 2 threads, \(Self.connections) connections, \(mode) requests\(pace.map { ", paced: \($0) ms per connection" } ?? ""), \(duration)s")
        let before = try bench.cpuTicks()
        let status = try Processes.run(
            Command("wrk", [
                "-t", "2", "-c", "\(Self.connections)", "-d", "\(duration)s", "--timeout", "10s", "--latency",
                "-s", bench.environment.script("check.lua"), url, "--", mode,
            ] + (pace.map { [$0] } ?? [])),
            stdout: .file(out), stderr: .append(out))
        let cpu = before.busyShare(until: try bench.cpuTicks())
        guard status == 0 else {
            printTail(of: out, lines: 40)
            throw BenchFailure("wrk failed in case (\(tag)) (output: \(out))")
        }
        let run = try CheckRun(WrkSummary(parsing: String(contentsOfFile: out, encoding: .utf8)))
        return CheckSummary.Measured(run: run, cpu: cpu, pace: pace)
    }

    /// Reads the server's /metrics, stops it, and notes its usage under its wrk output.
    private func stop(_ server: Server, tag: String) throws -> CheckSummary.Server {
        let file = bench.path("\(tag)-metrics.txt")
        guard try Processes.run(Command("curl", ["-fsS", "--max-time", "10", "-o", file, server.url + "/metrics"])) == 0 else {
            throw BenchFailure("GET /metrics failed")
        }
        let metrics = PrometheusText(try String(contentsOfFile: file, encoding: .utf8))
        let usage = try bench.stop(server)
        bench.note("upshift serve: \(usage); exit status after SIGTERM: \(usage.exitStatus)", to: bench.path("\(tag)-wrk.txt"))
        return CheckSummary.Server(metrics: metrics, usage: usage, logLines: bench.logLines(server))
    }
}

/// The release notes and minimum OS versions of the check's catalog.
enum CheckCatalog {
    static let notes: [(String, [String])] = [
        ("en", [
            "Faster sync of large libraries",
            "Fixes a crash when opening shared links",
            "New widgets for the Home Screen",
            "Improved VoiceOver labels throughout the app",
            "Search now finds results in attachments",
            "Lower battery use during background refresh",
            "Fixes missing badges after an update",
            "Dark mode polish in Settings and onboarding",
            "Export to PDF keeps your page layout",
            "More reliable offline edits",
        ]),
        ("de", [
            "Schnellere Synchronisierung großer Bibliotheken",
            "Behebt einen Absturz beim Öffnen geteilter Links",
            "Neue Widgets für den Home-Bildschirm",
            "Verbesserte VoiceOver-Beschriftungen in der ganzen App",
            "Die Suche findet jetzt auch Treffer in Anhängen",
            "Geringerer Akkuverbrauch bei der Hintergrundaktualisierung",
            "Behebt fehlende Kennzeichen nach einem Update",
            "Feinschliff für den Dunkelmodus in Einstellungen und Einführung",
            "Der PDF-Export behält das Seitenlayout bei",
            "Zuverlässigere Offline-Bearbeitung",
        ]),
        ("fr", [
            "Synchronisation plus rapide des grandes bibliothèques",
            "Corrige un plantage à l’ouverture des liens partagés",
            "Nouveaux widgets pour l’écran d’accueil",
            "Libellés VoiceOver améliorés dans toute l’app",
            "La recherche trouve désormais les résultats dans les pièces jointes",
            "Consommation de batterie réduite lors de l’actualisation en arrière-plan",
            "Corrige les pastilles manquantes après une mise à jour",
            "Finitions du mode sombre dans les réglages et l’accueil",
            "L’export PDF conserve la mise en page",
            "Modifications hors ligne plus fiables",
        ]),
    ]

    static let minimumOS = [
        "15.0", "15.0", "15.0", "15.0", "15.0", "15.4", "15.4", "15.4", "15.4", "16.0",
        "16.0", "16.0", "16.0", "16.4", "16.4", "16.4", "16.4", "17.0", "17.0", "17.0",
    ]

    /// "Release 1.0.0, line 07: 000...": 1,000 characters, the catalog's limit for a line.
    static func longNote(version: String, line: Int) -> String {
        let head = "Release \(version), line \(line < 10 ? "0" : "")\(line): "
        return String((head + String(repeating: "0", count: 980)).prefix(1000))
    }
}
