import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftTestSupport
import UpshiftWire

/// The export for a warehouse (docs/OPERATIONS.md, "Export for a warehouse") through `serve` and the CLI:
/// every event of the app once, in pages that follow their cursors; never past a transaction that
/// commits later; loaded back by the tools a team uses (`gzip`, `psql \copy`) into exactly the log's rows.
@Suite(.serverTimeLimit) struct EventExportTests {
    static let start = Timestamp.parse("2026-06-01T12:00:00Z")!

    /// Posts `count` events of a few installs, prompts among them (fields that land in `data`).
    static func post(_ count: Int, to server: Server, harness: Harness, at time: Date) async throws {
        let installs = (0..<4).map { _ in UUID() }
        let events = (0..<count).map { index in
            index % 3 == 0
                ? clientEvent(
                    type: "prompt_dismissed", occurredAt: time.addingTimeInterval(Double(index)), install: installs[index % 4],
                    extra: ["promptKind": "soft", "targetVersion": "1.9.0", "dismissAction": "later"])
                : clientEvent(occurredAt: time.addingTimeInterval(Double(index)), install: installs[index % 4])
        }
        let reply = try await server.postEvents(events, key: harness.ingestKey)
        let accepted = try reply.json()["accepted"] as? Int
        #expect(reply.status == 200 && accepted == count, "\(reply.text)")
    }

    /// The app's rows of the log, by event id: every column as the export's text would load it.
    static func logRows(_ harness: Harness, app: String = "expenses") async throws -> [String: [String: String]] {
        try await harness.sql { client in
            let rows = try await client.query(
                """
                SELECT event_id::text, type, coalesce(install_id::text, ''), coalesce(app_version, ''), data::text
                FROM event_log WHERE app_id = \(app)
                """, logger: TestEnvironment.logger)
            var byId: [String: [String: String]] = [:]
            for try await (id, type, install, version, data) in rows.decode((String, String, String, String, String).self) {
                byId[id] = ["type": type, "install_id": install, "app_version": version, "data": data]
            }
            return byId
        }
    }

    @Test func pagesFollowTheirCursorsThroughEveryEventOfTheAppOnce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            for batch in 0..<3 { try await Self.post(8, to: server, harness: harness, at: Self.start.addingTimeInterval(Double(-3_600 * batch))) }
            // A catalog write is an event of the app too; another app's events are not.
            let release = try await server.send(
                .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                json: .object(["platform": .string("ios"), "version": .string("1.9.0"), "releasedAt": .string("2026-06-01T00:00:00Z")]))
            #expect(release.status == 201, "\(release.text)")
            try await harness.sql { client in
                try await client.withConnection { connection in
                    try await insertEvent(on: connection, app: "other", install: UUID(), at: Self.start, version: "1.0")
                }
            }
            // An export stops below the oldest transaction still running anywhere in the cluster (other
            // suites' among them): past it, as the projections are, it has every event.
            try await harness.waitForProjections()
            var cursor = "0:0"
            var exported: [String: JSONValue] = [:]
            var pages = 0
            while true {
                let reply = try await server.send(.GET, "/v1/apps/expenses/events/export?since=\(cursor)&limit=10", key: harness.adminKey)
                #expect(reply.status == 200, "\(reply.text)")
                #expect(reply.headers["Content-Type"].first == "application/x-ndjson")
                let lines = reply.text.split(separator: "\n")
                #expect(
                    lines.count <= 10,
                    "since \(cursor), header \(reply.headers["Upshift-Cursor"].first ?? "-"): \(lines.compactMap { try? JSONValue.parse(Data($0.utf8))["cursor"]?.stringValue })")
                for line in lines {
                    let row = try JSONValue.parse(Data(line.utf8))
                    #expect(row.objectValue.map { Array($0.keys).sorted() } == EventExportFormat.columns.sorted(), "\(line)")
                    guard case .string(let id)? = row["event_id"] else { Issue.record("no event_id: \(line)"); continue }
                    #expect(exported[id] == nil, "\(id) exported twice")
                    exported[id] = row
                }
                let next = try #require(reply.headers["Upshift-Cursor"].first)
                let complete = reply.headers["Upshift-Complete"].first
                if lines.count == 10 {
                    #expect(next == exported.values.compactMap { $0["cursor"]?.stringValue }.max(by: Self.feedOrder))
                    #expect(complete == "false")
                } else {
                    #expect(complete == "true", "fewer rows than the limit: the answer reached the newest final event")
                }
                pages += 1
                if complete == "true" { break }
                cursor = next
            }
            let log = try await Self.logRows(harness)
            #expect(Set(exported.keys) == Set(log.keys))
            #expect(pages >= 3, "24 events and the catalog's, 10 a page")
            for (id, row) in exported {
                let stored = try #require(log[id])
                #expect(row["type"]?.stringValue == stored["type"] && (row["install_id"]?.stringValue ?? "") == stored["install_id"])
                #expect(row["data"] == (try JSONValue.parse(Data(stored["data", default: ""].utf8))), "\(id)")
                #expect(row["app_id"] == .string("expenses"))
            }
            // Times in RFC 3339 UTC to the microsecond: the first event posted is the batch's start.
            let first = exported.values.filter { $0["type"] == .string("prompt_dismissed") }
                .compactMap { $0["occurred_at"]?.stringValue }.min()
            #expect(first == "2026-06-01T10:00:00.000000Z")
        }
    }

    /// `a:b` before `c:d` in the feed's order.
    static func feedOrder(_ a: String, _ b: String) -> Bool {
        guard let a = FeedPosition(cursor: a), let b = FeedPosition(cursor: b) else { return false }
        return a < b
    }

    /// A transaction that took its position first and commits last: a cursor by position alone would pass
    /// it for good once a later event is exported. The export holds back both until it commits.
    @Test func anExportNeverPassesAnEventWhoseTransactionCommitsLater() async throws {
        let harness = try await Harness.make(now: Self.start)
        let late = UUID()
        try await harness.run { server in
            let (cursor, first) = try await harness.sql { client in
                try await client.withConnection { connection in
                    try await connection.query("BEGIN", logger: TestEnvironment.logger)
                    try await insertEvent(on: connection, app: "expenses", install: late, at: Self.start, version: "1.8.0")
                    try await Self.post(3, to: server, harness: harness, at: Self.start)
                    let first = try await server.send(.GET, "/v1/apps/expenses/events/export", key: harness.adminKey)
                    try await connection.query("COMMIT", logger: TestEnvironment.logger)
                    return (first.headers["Upshift-Cursor"].first ?? "", first.text)
                }
            }
            #expect(!first.contains(late.uuidString.lowercased()) && !first.contains("\"launched\""), "\(first)")
            try await harness.waitForProjections()
            let second = try await server.send(.GET, "/v1/apps/expenses/events/export?since=\(cursor)", key: harness.adminKey)
            #expect(second.text.contains(late.uuidString.lowercased()), "the late commit comes after the cursor")
            #expect(second.text.split(separator: "\n").filter { $0.contains("\"type\":\"launched\"") || $0.contains("prompt_dismissed") }.count == 4)
        }
    }

    /// CSV, gzipped: decompressed by `gzip` and loaded by `psql \copy`, it holds exactly the log's rows.
    @Test func aGzippedCSVLoadsIntoPostgreSQLAsTheLogsRows() async throws {
        let harness = try await Harness.make(now: Self.start)
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("export-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try await harness.run { server in
            try await Self.post(30, to: server, harness: harness, at: Self.start)
            try await harness.waitForProjections()
            // The bytes as sent: the client that follows redirects would inflate them itself.
            let reply = try await server.request(
                .GET, "/v1/apps/expenses/events/export",
                headers: [("Authorization", "Bearer \(harness.adminKey)"), ("Accept", "text/csv"), ("Accept-Encoding", "gzip")],
                followRedirects: false)
            #expect(reply.status == 200)
            #expect(reply.headers["Content-Encoding"].first == "gzip" && reply.headers["Content-Type"].first == "text/csv; charset=utf-8")
            try reply.body.write(to: folder.appendingPathComponent("events.csv.gz"))
        }
        let unzip = Process()
        unzip.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        unzip.arguments = ["gzip", "-d", folder.appendingPathComponent("events.csv.gz").path]
        let unzipped = try unzip.runPrinting()
        #expect(unzipped.status == 0, "\(unzipped.printed)")
        try await Self.load(folder.appendingPathComponent("events.csv"), into: harness)
    }

    /// Loads an export's CSV with `psql \copy` into a table of its columns, and finds there exactly the
    /// app's rows of the log.
    static func load(_ csv: URL, into harness: Harness) async throws {
        _ = try await harness.sql { client in
            try await client.query(
                """
                CREATE TABLE exported (cursor text, event_id uuid, occurred_at timestamptz, recorded_at timestamptz,
                  app_id text, type text, install_id uuid, platform text, app_version text, stream_id text,
                  stream_version bigint, data jsonb)
                """, logger: TestEnvironment.logger)
        }
        let psql = Process()
        psql.executableURL = PostgresCluster.binaryFolder?.appendingPathComponent("psql") ?? URL(fileURLWithPath: "/usr/bin/psql")
        psql.arguments = [
            "-X", "-v", "ON_ERROR_STOP=1",
            harness.databaseURL,
            "-c", "\\copy exported FROM '\(csv.path)' (FORMAT csv, HEADER true)",
        ]
        let loaded = try psql.runPrinting()
        #expect(loaded.status == 0, "\(loaded.printed)")
        let columns = "event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, stream_id, stream_version, data"
        let (missing, extra, count) = try await harness.sql { client in
            func count(_ text: String) async throws -> Int {
                let rows = try await client.query(PostgresQuery(unsafeSQL: text), logger: TestEnvironment.logger)
                for try await value in rows.decode(Int.self) { return value }
                return -1
            }
            let log = "SELECT \(columns) FROM event_log WHERE app_id = 'expenses'"
            let copy = "SELECT \(columns) FROM exported"
            return (
                try await count("SELECT count(*)::int8 FROM (\(log) EXCEPT \(copy)) AS x"),
                try await count("SELECT count(*)::int8 FROM (\(copy) EXCEPT \(log)) AS x"),
                try await count("SELECT count(*)::int8 FROM exported"))
        }
        #expect(missing == 0 && extra == 0, "rows of the log missing from the export: \(missing), rows not in the log: \(extra)")
        #expect(count > 30, "the 30 events posted and the app's catalog events")
    }

    /// `upshift log export --month`: a closed month's archive that `sha256sum -c` verifies and that
    /// `gzip -dc | psql \copy` loads back into exactly the month's rows, awkward text included; an open
    /// month, a bad one and a folder that is not there are refused, leaving no file.
    @Test func aClosedMonthsArchiveVerifiesAndLoadsBackIntoItsRows() async throws {
        let harness = try await Harness.make()
        let url = harness.databaseURL
        let march = Timestamp.parse("2020-03-15T08:00:00Z")!
        try await harness.sql { client in
            try await client.withConnection { connection in
                try await connection.query(
                    "CREATE TABLE event_log_2020_03 PARTITION OF event_log FOR VALUES FROM ('2020-03-01') TO ('2020-04-01')",
                    logger: TestEnvironment.logger)
                for index in 0..<25 {
                    try await insertEvent(
                        on: connection, app: index % 2 == 0 ? "expenses" : "other", install: UUID(),
                        at: march.addingTimeInterval(Double(index * 3_600)), version: "1.\(index)\ttab\nnewline\rreturn\\N",
                        data: #"{"note": "tab\t, newline\n, backslash \\ and \"quotes\""}"#)
                }
                // The first instant of April is April's.
                try await connection.query(
                    "CREATE TABLE event_log_2020_04 PARTITION OF event_log FOR VALUES FROM ('2020-04-01') TO ('2020-05-01')",
                    logger: TestEnvironment.logger)
                try await insertEvent(
                    on: connection, app: "expenses", install: UUID(), at: Timestamp.parse("2020-04-01T00:00:00Z")!, version: "2.0")
            }
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("archive-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let written = try await BinaryTests.command(["log", "export", "--month", "2020-03", "--directory", folder.path], databaseURL: url)
        #expect(written.status == 0, "\(written.error)")
        #expect(written.output.contains("event_log_2020_03.copy.gz: 25 events of 2020-03, sha256 "), "\(written.output)")
        let files = try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
        #expect(files == ["event_log_2020_03.copy.gz", "event_log_2020_03.copy.gz.rows", "event_log_2020_03.copy.gz.sha256"])
        #expect(try String(contentsOf: folder.appendingPathComponent("event_log_2020_03.copy.gz.rows"), encoding: .utf8) == "25\n")
        let check = Process()
        check.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        check.arguments = ["sha256sum", "-c", "event_log_2020_03.copy.gz.sha256"]
        check.currentDirectoryURL = folder
        let checked = try check.runPrinting()
        #expect(checked.status == 0 && checked.printed.contains("event_log_2020_03.copy.gz: OK"), "\(checked.printed)")

        // Loaded back into a table like the log, it is the month's rows, every column equal.
        _ = try await harness.sql { client in
            try await client.query("CREATE TABLE restored (LIKE event_log)", logger: TestEnvironment.logger)
        }
        let psql = PostgresCluster.binaryFolder?.appendingPathComponent("psql").path ?? "psql"
        let load = Process()
        load.executableURL = URL(fileURLWithPath: "/bin/sh")
        load.arguments = ["-c", "gzip -dc event_log_2020_03.copy.gz | '\(psql)' -X -v ON_ERROR_STOP=1 '\(url)' -c '\\copy restored FROM STDIN'"]
        load.currentDirectoryURL = folder
        let loaded = try load.runPrinting()
        #expect(loaded.status == 0, "\(loaded.printed)")
        let month = "SELECT * FROM event_log WHERE occurred_at >= '2020-03-01' AND occurred_at < '2020-04-01'"
        #expect(try await harness.count("SELECT count(*)::int8 FROM (\(unescaped: month) EXCEPT SELECT * FROM restored) AS x") == 0)
        #expect(try await harness.count("SELECT count(*)::int8 FROM (SELECT * FROM restored EXCEPT \(unescaped: month)) AS x") == 0)

        for (arguments, words) in [
            (["--month", "2020-13"], "--month"), (["--month", "20-03"], "--month"),
            (["--month", LogMonth(String(Timestamp.format(Date()).prefix(7)))!.description], "may still receive events"),
            (["--month", "2020-03", "--directory", folder.appendingPathComponent("missing").path], "cannot write into"),
            (["--month", "2020-03", "--app", "expenses"], "--month takes only --directory"),
        ] {
            let refused = try await BinaryTests.command(["log", "export"] + arguments, databaseURL: url)
            #expect(refused.status != 0 && refused.error.contains(words), "\(arguments): \(refused.error)")
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).count == 3, "no partial file left")
    }

    @Test func badCursorsLimitsAndCallersAreRefusedNamingWhy() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            let path = "/v1/apps/expenses/events/export"
            #expect(try await server.send(.GET, path, key: nil).status == 401)
            #expect(try await server.send(.GET, path, key: harness.readKey).status == 403, "install ids are personal data")
            #expect(try await server.send(.GET, path, key: harness.ingestKey).status == 403)
            #expect(try await server.send(.GET, "/v1/apps/nothing/events/export", key: harness.rootKey).status == 404)
            for (query, field) in [
                ("since=x", "since"), ("since=1:", "since"), ("since=:1", "since"), ("since=-1:0", "since"),
                ("since=1:2:3", "since"), ("since=0:00000000000000000001", "since"), ("since=%2B1:0", "since"),
                ("limit=0", "limit"), ("limit=100001", "limit"), ("after=0:0", "after"),
                // Hostile values: NUL, over-long, a huge number, the wrong type, sent twice.
                ("since=0%00:0", "since"), ("since=" + String(repeating: "9", count: 5_000) + ":0", "since"),
                ("since=0:0&since=1:1", "since"), ("limit=99999999999999999999", "limit"), ("limit=ten", "limit"),
                ("limit=1.5", "limit"), ("limit=10&limit=20", "limit"),
            ] {
                let reply = try await server.send(.GET, "\(path)?\(query)", key: harness.adminKey)
                #expect(reply.status == 400, "\(query): \(reply.text)")
                #expect(try reply.value()["field"] == .string(field), "\(query): \(reply.text)")
            }
            // A cursor in the right form that no export gave, also one past what the log can number: ahead of the log.
            for since in ["99999999999:0", "46165258106089887403:60700"] {
                let ahead = try await server.send(.GET, "\(path)?since=\(since)", key: harness.adminKey)
                #expect(ahead.status == 422, "\(ahead.text)")
                #expect(try ahead.value()["field"] == .string("since"), "\(ahead.text)")
            }
        }
    }
}
