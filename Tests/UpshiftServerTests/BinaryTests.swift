import Foundation
import PostgresNIO
import Synchronization
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport
import UpshiftWire

/// `upshift` put on PATH works from any folder: it carries its migrations and its API description.
@Suite(.serverTimeLimit) struct BinaryTests {
    @Test func theBuiltInMigrationsAreTheFilesOfSql() throws {
        let builtIn = try Migration.embedded()
        #expect(!builtIn.isEmpty)
        #expect(builtIn == (try Migration.load(from: TestEnvironment.migrationsDirectory)))
    }

    @Test func serveRunsFromAFolderWithoutSqlAndServesItsAPIDescription() async throws {
        let harness = try await Harness.make()
        let elsewhere = TestEnvironment.scratch("elsewhere")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let server = try ServerProcess(
            database: harness.database, port: try await freePort(), extraEnvironment: ["UPSHIFT_MIGRATIONS_DIR": ""],
            workingDirectory: elsewhere)
        try await server.start()
        let reply = try await Server(port: server.port).request(.GET, "/openapi.yaml")
        #expect(reply.status == 200)
        let document = try Data(contentsOf: TestEnvironment.packageRoot.appendingPathComponent("docs/openapi.yaml"))
        #expect(Data(reply.body) == document)
        #expect(await server.terminate() == 0)
    }

    /// `upshift --version` prints the version and nothing else; the help of the options a newcomer reads
    /// says what they do, in words rather than the letters of the design's formulas.
    @Test func theVersionAndTheHelpSpeakForThemselves() async throws {
        let version = try await Self.command(["--version"], databaseURL: "")
        #expect(version.status == 0)
        #expect(version.output == "0.1.0\n")
        // The help wraps its lines: its words, one space apart.
        func help(_ arguments: [String]) async throws -> String {
            let printed = try await Self.command(arguments + ["--help"], databaseURL: "")
            #expect(printed.status == 0, "\(arguments)")
            return printed.output.split(whereSeparator: \.isWhitespace).joined(separator: " ")
        }
        let policy = try await help(["policy", "set"])
        for letter in ["(X)", "(Y)", "(Z)"] { #expect(!policy.contains(letter), "\(policy)") }
        #expect(policy.contains("before installs below it are forced to update"), "\(policy)")
        let releases = try await help(["releases", "add"])
        #expect(releases.contains("On macOS the appcast sends it as sparkle:version"))
    }

    /// Runs `upshift <arguments>` with `DATABASE_URL` set and returns its exit status, what it printed to
    /// standard output and to standard error, and how long it took.
    ///
    /// It waits on a thread of its own: the cooperative pool has a thread per core, and a command that waits
    /// on this process (the fake App Store answers here) must not find them all blocked waiting for it.
    static func command(_ arguments: [String], databaseURL: String, environment: [String: String] = [:]) async throws
        -> (status: Int32, output: String, error: String, took: Duration)
    {
        try await withCheckedThrowingContinuation { continuation in
            Thread { continuation.resume(with: Result { try run(arguments, databaseURL: databaseURL, extra: environment) }) }.start()
        }
    }

    private static func run(_ arguments: [String], databaseURL: String, extra: [String: String]) throws
        -> (status: Int32, output: String, error: String, took: Duration)
    {
        let process = Process()
        process.executableURL = try TestEnvironment.binary()
        process.arguments = arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = databaseURL
        for (name, value) in extra { environment[name] = value }
        process.environment = environment
        let (output, errors) = (Pipe(), Pipe())
        process.standardOutput = output
        process.standardError = errors
        let started = ContinuousClock.now
        try process.run()
        // Standard output is read on a thread of its own, so that neither pipe can fill while the other is read.
        let printed = Mutex(Data())
        let reader = Thread { printed.withLock { $0 = output.fileHandleForReading.readDataToEndOfFile() } }
        reader.start()
        let text = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        while !reader.isFinished { Thread.sleep(forTimeInterval: 0.01) }
        return (process.terminationStatus, String(decoding: printed.withLock { $0 }, as: UTF8.self), text, ContinuousClock.now - started)
    }

    /// `upshift projections rebuild`: a new generation built and switched in; a pause factor that is not
    /// a number from 0 to 100 is refused, naming the option.
    @Test func theRebuildCommandSwitchesInANewGenerationAndRefusesABadRest() async throws {
        let harness = try await Harness.make()
        let url = harness.databaseURL
        let now = harness.clock.now()
        try await harness.run { server in
            #expect(try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
        }
        for rest in ["-1", "101", "nan", "soon"] {
            let refused = try await Self.command(["projections", "rebuild", "install_state", "--rest=\(rest)"], databaseURL: url)
            #expect(refused.status != 0, "--rest \(rest)")
            #expect(refused.error.contains("--rest"), "--rest \(rest): \(refused.error)")
        }
        let rebuilt = try await Self.command(["projections", "rebuild", "install_state", "--rest", "0.5"], databaseURL: url)
        #expect(rebuilt.status == 0, "\(rebuilt.error)")
        #expect(rebuilt.output.contains("install_state: generation 2 "), "\(rebuilt.output)")
        #expect(rebuilt.output.contains(" is active, "), "\(rebuilt.output)")
    }

    /// The progress `upshift projections rebuild --in-batches` prints ends at 100 % of the events it
    /// applied, also when the feed (in commit order) applies a lower position last: here one transaction
    /// takes its id first and writes its events after another's, which commits after it.
    @Test func aRebuildsProgressEndsAtAllItsEventsWhateverTheirPositions() async throws {
        let harness = try await Harness.make()
        let database = harness.database
        let url = harness.databaseURL
        let now = harness.clock.now()
        let logged = try await withPostgres(database, maximumConnections: 2) { client in
            try await client.withConnection { first in
                try await client.withConnection { second in
                    func insert(_ count: Int, on connection: PostgresConnection) async throws {
                        for _ in 0..<count {
                            try await insertEvent(on: connection, app: harness.appId, install: UUID(), at: now, version: "1.0.0")
                        }
                    }
                    try await first.query("BEGIN", logger: TestEnvironment.logger)
                    try await first.query("SELECT pg_current_xact_id()", logger: TestEnvironment.logger)
                    try await second.query("BEGIN", logger: TestEnvironment.logger)
                    try await insert(1, on: second)  // the lowest position, applied last
                    try await insert(20, on: first)
                    try await first.query("COMMIT", logger: TestEnvironment.logger)
                    try await second.query("COMMIT", logger: TestEnvironment.logger)
                }
            }
            var count = 0
            for try await events in try await client.query("SELECT count(*)::int FROM event_log").decode(Int.self) { count = events }
            // The feed stops at the cluster's oldest open transaction (docs/ARCHITECTURE.md, "The horizon is
            // cluster-wide"), which the suites beside this one may hold: the rebuild applies the whole log
            // once the horizon has passed it.
            try await Waits.until("the feed's horizon passes the log", timeout: .seconds(60), every: .milliseconds(100)) {
                var passed = false
                for try await value in try await client.query(
                    "SELECT pg_snapshot_xmin(pg_current_snapshot()) > max(tx_id) FROM event_log"
                ).decode(Bool.self) { passed = value }
                return passed
            }
            return count
        }
        let rebuilt = try await Self.command(["projections", "rebuild", "install_state", "--in-batches"], databaseURL: url)
        #expect(rebuilt.status == 0, "\(rebuilt.error)")
        let last = rebuilt.error.split(whereSeparator: \.isNewline).last { $0.contains("events/s") }.map(String.init)
        #expect(last?.contains("100%") == true, "\(rebuilt.error)")
        #expect(last?.contains(" \(logged) events ") == true, "\(logged) events logged: \(rebuilt.error)")
    }

    /// `upshift apps edit`: a merge patch as `PATCH /v1/apps/{app}` takes it, at the revision it reads or the
    /// one given; a stale `--revision` and a bad value are refused, naming why.
    @Test func appsEditChangesOnlyWhatItIsGivenAtTheRevisionItReads() async throws {
        let harness = try await Harness.make()
        let url = harness.databaseURL
        let edited = try await Self.command(
            ["apps", "edit", "--app", "expenses", "--store-id", "ios=123", "--bundle-id", "ios=com.example.expenses",
             "--update-url", "android=market://details?id=x", "--reason", "store ids"], databaseURL: url)
        #expect(edited.status == 0, "\(edited.error)")
        #expect(edited.output.contains("app expenses is now at revision 2"), "\(edited.output)")
        let removed = try await Self.command(
            ["apps", "edit", "--app", "expenses", "--remove-update-url", "android", "--revision", "2"], databaseURL: url)
        #expect(removed.status == 0 && removed.output.contains("revision 3"), "\(removed.error)")
        #expect(removed.output.contains("warning: android has no updateURL now"), "\(removed.output)")
        let stale = try await Self.command(["apps", "edit", "--app", "expenses", "--name", "X", "--revision", "2"], databaseURL: url)
        #expect(stale.status != 0 && stale.error.contains("stale"), "\(stale.error)")
        let bad = try await Self.command(["apps", "edit", "--app", "expenses", "--update-url", "ios=ftp://x"], databaseURL: url)
        #expect(bad.status != 0 && bad.error.contains("updateURL.ios"), "\(bad.error)")
        let shown = try await Self.command(["apps", "show", "expenses"], databaseURL: url)
        #expect(shown.output.contains("revision 3") && shown.output.contains("store id 123"), "\(shown.output)")
        #expect(!shown.output.contains("android"), "\(shown.output)")
    }

    /// `upshift rules`: a rule written from JSON as a dry run, listed, made live with `--state` alone, its
    /// (empty) records printed, removed; a bad definition is refused naming its field.
    @Test func rulesAreWrittenListedAndRemovedFromTheCommandLine() async throws {
        let harness = try await Harness.make()
        let url = harness.databaseURL
        let target = ["--app", "expenses", "--platform", "ios", "--id", "crash-guard"]
        let written = try await Self.command(
            ["rules", "set"] + target + ["--definition", #"{"kind":"halt_on_health","mode":"guarded"}"#, "--reason", "guard"],
            databaseURL: url)
        #expect(written.status == 0, "\(written.error)")
        #expect(written.output.contains("rule crash-guard of expenses on ios is now at revision 1"), "\(written.output)")
        let live = try await Self.command(["rules", "set"] + target + ["--state", "live", "--reason", "trusted"], databaseURL: url)
        #expect(live.status == 0 && live.output.contains("revision 2"), "\(live.error)")
        let listed = try await Self.command(["rules", "list", "--app", "expenses"], databaseURL: url)
        let rules = try JSONValue.parse(Data(listed.output.utf8)).arrayValue ?? []
        #expect(rules.count == 1)
        #expect(rules.first?["state"] == .string("live") && rules.first?["mode"] == .string("guarded"), "\(listed.output)")
        let bad = try await Self.command(
            ["rules", "set", "--app", "expenses", "--platform", "ios", "--id", "raise",
             "--definition", #"{"kind":"raise_minimum","version":"2.0","share":0.9,"windowDays":7}"#, "--reason", "x"],
            databaseURL: url)
        #expect(bad.status != 0 && bad.error.contains("maximumForced"), "\(bad.error)")
        let badId = try await Self.command(["rules", "records", "--app", "expenses", "--platform", "ios", "--id", "No"], databaseURL: url)
        #expect(badId.status != 0 && badId.error.contains("not a rule id"), "\(badId.error)")
        let records = try await Self.command(["rules", "records"] + target, databaseURL: url)
        #expect(records.status == 0 && records.output.isEmpty, "\(records.output)\(records.error)")
        let removed = try await Self.command(["rules", "remove"] + target + ["--reason", "done"], databaseURL: url)
        #expect(removed.status == 0 && removed.output.contains("removed"), "\(removed.error)")
        let empty = try await Self.command(["rules", "list", "--app", "expenses"], databaseURL: url)
        #expect(try JSONValue.parse(Data(empty.output.utf8)) == .array([]), "\(empty.output)")
    }

    /// `upshift log export`: a gzipped NDJSON file written whole, every event of the app, and the cursor
    /// to resume from, after which there is nothing; a cursor that is no cursor or ahead of the log is
    /// refused naming `--since`.
    @Test func theLogIsExportedFromTheCommandLineAndResumesAtItsCursor() async throws {
        let harness = try await Harness.make()
        let url = harness.databaseURL
        let now = harness.clock.now()
        try await harness.run { server in
            let events = (0..<12).map { clientEvent(occurredAt: now.addingTimeInterval(Double(-$0))) }
            let posted = try await server.postEvents(events, key: harness.ingestKey)
            #expect(posted.status == 200)
            try await harness.waitForProjections()  // past every transaction that was running meanwhile
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("log-export-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let file = folder.appendingPathComponent("expenses.ndjson.gz").path
        let exported = try await Self.command(["log", "export", "--app", "expenses", "--gzip", "--output", file], databaseURL: url)
        #expect(exported.status == 0, "\(exported.error)")
        #expect(!FileManager.default.fileExists(atPath: file + ".partial"))
        let unzip = Process()
        unzip.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        unzip.arguments = ["gzip", "-dc", file]
        let text = try unzip.runPrinting()
        #expect(text.status == 0)
        let lines = text.printed.split(separator: "\n")
        let stored = try await harness.count("SELECT count(*)::int8 FROM event_log WHERE app_id = 'expenses'")
        #expect(lines.count == stored && stored >= 12, "\(text.printed.prefix(300))")
        #expect(lines.allSatisfy { (try? JSONValue.parse(Data($0.utf8)))?["app_id"] == .string("expenses") })
        let resume = try #require(exported.error.split(separator: " ").last.map { $0.trimmingCharacters(in: .whitespacesAndNewlines) })
        #expect(exported.error.hasPrefix("exported \(stored) events of expenses; resume with --since "), "\(exported.error)")
        let again = try await Self.command(["log", "export", "--app", "expenses", "--since", resume, "--format", "csv"], databaseURL: url)
        #expect(again.status == 0 && again.output == CSVTable.line(EventExportFormat.columns), "\(again.output)\(again.error)")
        for since in ["nope", "99999999999:0"] {
            let refused = try await Self.command(["log", "export", "--app", "expenses", "--since", since], databaseURL: url)
            #expect(refused.status != 0 && refused.error.contains("--since"), "\(since): \(refused.error)")
        }
    }

    /// A database that cannot be reached is named, with why, within seconds (not after a minute of
    /// silence and a pool error).
    @Test func theCLINamesAnUnreachableDatabaseAndWhy() async throws {
        let server = try TestEnvironment.databaseSettings()
        let refusing = try RefusingPort()
        let closed = refusing.port
        let cases: [(url: String, expected: String)] = [
            ("postgres://postgres@127.0.0.1:\(closed)/upshift", "127.0.0.1:\(closed) (database upshift, user postgres): connection refused"),
            ("postgres://postgres@\(server.host):\(server.port)/no_such_database_here", "unknown database:"),
            ("postgres://no_such_role_here@\(server.host):\(server.port)/postgres", "authentication failed:"),
            ("postgres://postgres@no-such-host.invalid:5432/upshift", "no-such-host.invalid:5432"),
        ]
        // A listener that accepts and never answers (a network partition): named as timed out, after the
        // probe's 5 s.
        let silent = try await TCPProxy.start(targetHost: server.host, targetPort: server.port)
        silent.stall()
        let silentURL = "postgres://postgres@127.0.0.1:\(silent.port)/upshift"
        for (url, expected) in cases + [(silentURL, "127.0.0.1:\(silent.port) (database upshift, user postgres): the connection timed out")] {
            let run = try await Self.command(["keys", "list"], databaseURL: url)
            #expect(run.status != 0, "\(url)")
            #expect(run.error.contains("cannot connect to PostgreSQL at"), "\(url): \(run.error)")
            #expect(run.error.contains(expected), "\(url): \(run.error)")
            #expect(run.took < .seconds(10), "\(url): \(run.took)")
        }
        await silent.stop()
        withExtendedLifetime(refusing) {}
    }

    /// `serve` waits for its database at start and says, each second, why it cannot connect; after the
    /// 60 s its documentation gives, it exits non-zero naming the host, the port and the cause.
    @Test func serveLogsEachAttemptToReachItsDatabaseWithTheCause() async throws {
        let refusing = try RefusingPort()
        let closed = refusing.port
        var database = try TestEnvironment.databaseSettings()
        database.port = closed
        let server = try ServerProcess(database: database, port: try await freePort())
        try server.process.run()
        let started = ContinuousClock.now
        try? await Waits.until("four attempts logged", timeout: .seconds(20), every: .milliseconds(200)) {
            server.log().components(separatedBy: "database unreachable at start").count >= 4
        }
        let log = server.log()
        #expect(server.process.isRunning, "serve gave up before its 60 s: \(log)")
        #expect(log.components(separatedBy: "database unreachable at start").count >= 4, "\(log)")
        #expect(log.contains("attempt=3"), "\(log)")
        #expect(log.contains("127.0.0.1:\(closed)") && log.contains("connection refused"), "\(log)")
        let end = ContinuousClock.now.advanced(by: .seconds(90))
        while server.process.isRunning, ContinuousClock.now < end { try await Task.sleep(for: .milliseconds(200)) }
        guard !server.process.isRunning else {
            server.kill9()
            Issue.record("serve still waits for its database after 90 s")
            return
        }
        let waited = ContinuousClock.now - started
        print("serve gave up on an unreachable database after \(waited)")
        #expect(server.process.terminationStatus != 0)
        #expect(waited >= .seconds(60) && waited < .seconds(75), "\(waited)")
        let last = server.log().split(separator: "\n").last { $0.contains("cannot connect to PostgreSQL at") && !$0.contains("retrying") }
        #expect(last?.contains("127.0.0.1:\(closed)") == true && last?.contains("connection refused") == true, "\(server.log().suffix(600))")
        withExtendedLifetime(refusing) {}
    }
    /// `serve`'s flags override the environment (docs/OPERATIONS.md, "`serve` flags override them"): it runs on the database of
    /// `--database-url`, or of `--postgres-*`, while `DATABASE_URL` names one nobody listens on; a bad
    /// `--trusted-proxies` stops it with a message naming the flag.
    @Test func serveFlagsOverrideTheEnvironment() async throws {
        let harness = try await Harness.make()
        let database = harness.database
        let nowhere = "postgres://postgres@127.0.0.1:\(try await freePort())/nothing"
        var url = "postgres://\(database.username)"
        if let password = database.password { url += ":\(password)" }
        url += "@\(database.host):\(database.port)/\(database.database)"
        var parts = ["DATABASE_URL": nowhere, "POSTGRES_USER": database.username]
        if let password = database.password { parts["POSTGRES_PASSWORD"] = password }
        let runs: [(environment: [String: String], arguments: [String])] = [
            (["DATABASE_URL": nowhere], ["--database-url", url, "--trusted-proxies", "127.0.0.1, ::1"]),
            (parts, ["--postgres-host", database.host, "--postgres-port", String(database.port), "--postgres-db", database.database]),
        ]
        for run in runs {
            let server = try ServerProcess(
                database: database, port: try await freePort(), extraEnvironment: run.environment,
                arguments: ["--roles", "http"] + run.arguments)
            try await server.start()
            #expect(await server.terminate() == 0, "\(run.arguments): \(server.log())")
        }

        let refused = try ServerProcess(
            database: database, port: try await freePort(), arguments: ["--roles", "http", "--trusted-proxies", "10.0.0.0/8"])
        try refused.process.run()
        try? await Waits.until("serve refusing a bad --trusted-proxies", timeout: .seconds(20)) { !refused.process.isRunning }
        #expect(!refused.process.isRunning, "serve started with a bad --trusted-proxies")
        #expect(await refused.terminate() != 0)
        #expect(refused.log().contains("--trusted-proxies"), "\(refused.log())")
    }
}
