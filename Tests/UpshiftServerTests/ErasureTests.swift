import Foundation
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// Erasure of an install (docs/OPERATIONS.md, "Erasure"), through `serve` and the CLI: afterwards every
/// projection table and dead letter equals what a rebuild from the log gives (the log no longer holds the
/// install's events, so a rebuild is a log that never held them), also for an erasure requested before
/// any projection read the install's events, and for an install whose event is resent afterwards (new
/// data).
@Suite(.serverTimeLimit) struct ErasureTests {
    static let start = Date(timeIntervalSince1970: 1_795_000_000)  // 2026-11-18

    @Test func erasedInstallsLeaveEveryFigureAsIfTheLogNeverHeldThem() async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = sampleFleet(now: Self.start, installs: 240)
        // Installs with prompts, updates and several days, each erased one way.
        let byInstall = Dictionary(grouping: fleet) { $0["installId"]! }
        let busy = byInstall.filter { Set($0.value.map { $0["type"]! }).count >= 3 }.keys.sorted()
        try #require(busy.count >= 4)
        let (early, late, resent) = (busy[0], busy[1], busy[2])

        // 1. Only the HTTP role: the events are logged, and the first erasure is requested before any
        //    projection has read them.
        var http = harness.configuration()
        http.roles = [.http]
        let first = try await harness.run(http) { server -> String in
            for (version, daysAgo) in [("1.1.0", 10.0), ("1.2.0", 4.0)] {
                let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
                    "platform": .string("ios"), "version": .string(version),
                    "releasedAt": .string(Timestamp.format(Self.start.addingTimeInterval(-daysAgo * 86_400))),
                ]))
                #expect(created.status == 201)
            }
            for chunk in stride(from: 0, to: fleet.count, by: 250) {
                #expect(try await server.postEvents(Array(fleet[chunk..<min(chunk + 250, fleet.count)]), key: harness.ingestKey).status == 200)
            }
            let requested = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(early)", key: harness.adminKey)
            #expect(requested.status == 202)
            let body = try requested.json()
            let id = try #require(body["id"] as? String)
            #expect(body["status"] as? String == "pending")
            #expect(!String(decoding: requested.body, as: UTF8.self).contains(early))
            // A repeat while it is open answers the same request.
            let again = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(early.uppercased())", key: harness.adminKey)
            #expect(again.status == 202)
            #expect(try again.json()["id"] as? String == id)
            // Bad input, and callers without an admin token.
            let malformed = try await server.send(.DELETE, "/v1/apps/expenses/installs/not-a-uuid", key: harness.adminKey)
            #expect(malformed.status == 400)
            #expect(try malformed.json()["field"] as? String == "install")
            #expect(try await server.send(.GET, "/v1/apps/expenses/erasures/42", key: harness.adminKey).status == 400)
            #expect(try await server.send(.GET, "/v1/apps/expenses/erasures/\(UUID())", key: harness.adminKey).status == 404)
            #expect(try await server.send(.DELETE, "/v1/apps/nope/installs/\(early)", key: harness.rootKey).status == 404)
            #expect(try await server.send(.DELETE, "/v1/apps/expenses/installs/\(early)", key: harness.readKey).status == 403)
            #expect(try await server.send(.DELETE, "/v1/apps/expenses/installs/\(early)", key: nil).status == 401)
            // Clients may not post the mark an erasure leaves.
            var forged = fleet[0]
            forged["id"] = UUID().uuidString
            forged["type"] = "install_forgotten"
            let refused = try await server.postEvents([forged], key: harness.ingestKey)
            #expect(String(decoding: refused.body, as: UTF8.self).contains("reserved_type"))
            return id
        }
        #expect(try await harness.count("SELECT count(*)::int8 FROM projections") == 0, "a projection ran on the HTTP role")

        // 2. The whole server: the projections catch up, then the first erasure runs; a second one is
        //    requested while everything runs, and after it is done an event of a third install comes again.
        var configuration = harness.configuration()
        configuration.projections.erasurePass = .milliseconds(200)
        let resentEvent = try #require(byInstall[resent]?.first)
        try await harness.run(configuration) { server in
            let done = try await Self.waitUntilDone(first, server: server, harness: harness, install: early)
            #expect(done["events"] as? Int == byInstall[early]!.count)
            try await harness.waitForProjections()
            let daysOfLate = try await harness.count(
                "SELECT count(DISTINCT (occurred_at AT TIME ZONE 'UTC')::date)::int8 FROM event_log WHERE install_id = \(UUID(uuidString: late)!)")
            let before = try await Self.adoptionTotal(harness)
            let second = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(late)", key: harness.adminKey)
            #expect(second.status == 202)
            _ = try await Self.waitUntilDone(try #require(try second.json()["id"] as? String), server: server, harness: harness)
            // The figures moved by exactly what the install counted.
            #expect(try await Self.adoptionTotal(harness) == before - daysOfLate)
            // An export made afterwards holds neither erased install, and each erasure's mark.
            let export = try await server.send(.GET, "/v1/apps/expenses/events/export?limit=100000", key: harness.adminKey)
            #expect(export.status == 200)
            let exported = String(decoding: export.body, as: UTF8.self)
            #expect(exported.contains(busy[3]) && !exported.contains(early) && !exported.contains(late))
            #expect(exported.components(separatedBy: "\"install_forgotten\"").count == 3)

            let third = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(resent)", key: harness.adminKey)
            _ = try await Self.waitUntilDone(try #require(try third.json()["id"] as? String), server: server, harness: harness)
            // Its event comes again: the record of its id went with it, so it is new data.
            #expect(try await server.postEvents([resentEvent], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
        }

        for install in [early, late] {
            let id = UUID(uuidString: install)!
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id = \(id)") == 0)
            #expect(try await harness.count("SELECT count(*)::int8 FROM erasures WHERE install_id = \(id)") == 0)
        }
        let resentId = UUID(uuidString: resentEvent["id"]!)!
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id = \(UUID(uuidString: resent)!)") == 1)
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_ids WHERE event_id = \(resentId)") == 1)
        let eventIds = byInstall[early]!.map { UUID(uuidString: $0["id"]!)! }
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_ids WHERE event_id = ANY(\(eventIds))") == 0)
        #expect(try await harness.count("SELECT count(*)::int8 FROM erasure_events") == 0)
        // Each erasure left one mark in the log, with no identifier of the install.
        #expect(
            try await harness.count(
                "SELECT count(*)::int8 FROM event_log WHERE type = 'install_forgotten' AND install_id IS NULL AND data ? 'erasure' AND NOT data ? 'installId'"
            ) == 3)
        try await harness.expectRebuildEqualsActiveTables(backfill: true)
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }

    /// A generation that rebuilds while an install is erased: the erasure waits until it has applied the
    /// install's events, and the generation takes them out as the active one does, before or after it is
    /// switched in.
    @Test func aGenerationThatRebuildsTakesTheInstallOutToo() async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = sampleFleet(now: Self.start, installs: 120)
        let install = try #require(fleet.first?["installId"])
        let hold = Mutex(false)
        var configuration = harness.configuration()
        configuration.projections.erasurePass = .milliseconds(200)
        configuration.projections.backfillThreshold = nil
        configuration.projections.batchSize = 200
        // While held, adoption's batches roll back: its new generation stays at the start of the log.
        configuration.projections.beforeCommit = { name in
            if name == "adoption", hold.withLock({ $0 }) { throw HarnessError("held") }
        }
        try await harness.run(configuration) { server in
            for chunk in stride(from: 0, to: fleet.count, by: 250) {
                #expect(try await server.postEvents(Array(fleet[chunk..<min(chunk + 250, fleet.count)]), key: harness.ingestKey).status == 200)
            }
            try await harness.waitForProjections()
            hold.withLock { $0 = true }
            let building = try await harness.sql { client in
                try await ProjectionStore(client: client, logger: TestEnvironment.logger).beginRebuild(AdoptionProjection())
            }
            let id = try await Self.requestWhileHeld(install, server: server, harness: harness)
            hold.withLock { $0 = false }
            _ = try await Self.waitUntilDone(id, server: server, harness: harness)
            try await Waits.until("the rebuilt generation switched in", timeout: .seconds(120)) {
                try await harness.count(
                    "SELECT count(*)::int8 FROM projections WHERE name = 'adoption' AND generation = \(building.generation) AND state = 'active'") == 1
            }
            try await harness.waitForProjections()
        }
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id = \(UUID(uuidString: install)!)") == 0)
        try await harness.expectRebuildEqualsActiveTables(backfill: true, requireRows: false)
    }

    /// An install erased while the projections have read only part of its events, one of those read
    /// dead-lettered: the erasure waits until they have passed the rest, and afterwards no figure and no
    /// dead letter holds the install; every table equals a rebuild from the log, which no longer holds it.
    @Test func anInstallErasedWhileTheProjectionsLagBehindPartOfItsEvents() async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = sampleFleet(now: Self.start, installs: 120)
        let byInstall = Dictionary(grouping: fleet) { $0["installId"]! }
        let install = try #require(byInstall.filter { $0.value.count >= 4 }.keys.sorted().first)
        let ownEvents = byInstall[install]!
        let later = Set(ownEvents.suffix(ownEvents.count / 2).map { $0["id"]! })
        let hold = Mutex(false)
        var configuration = harness.configuration()
        configuration.projections.erasurePass = .milliseconds(200)
        // While held, every projection's batches roll back: they stay where they were.
        configuration.projections.beforeCommit = { _ in
            if hold.withLock({ $0 }) { throw HarnessError("held") }
        }
        try await harness.run(configuration) { server in
            let (read, unread) = (fleet.filter { !later.contains($0["id"]!) }, fleet.filter { later.contains($0["id"]!) })
            for chunk in stride(from: 0, to: read.count, by: 250) {
                #expect(try await server.postEvents(Array(read[chunk..<min(chunk + 250, read.count)]), key: harness.ingestKey).status == 200)
            }
            // One of its events that no projection can read, written around the API as a broken importer might.
            try await harness.sql { client in
                try await client.withConnection { connection in
                    try await insertEvent(
                        on: connection, app: harness.appId, install: UUID(uuidString: install)!, at: Self.start.addingTimeInterval(-86_400),
                        version: "one.two")
                }
            }
            try await harness.waitForProjections()
            #expect(try await harness.count("SELECT count(*)::int8 FROM projection_dead_letters") > 0)
            hold.withLock { $0 = true }
            #expect(try await server.postEvents(unread, key: harness.ingestKey).status == 200)
            let id = try await Self.requestWhileHeld(install, server: server, harness: harness)
            hold.withLock { $0 = false }
            let done = try await Self.waitUntilDone(id, server: server, harness: harness, install: install)
            #expect(done["events"] as? Int == ownEvents.count + 1)
            try await harness.waitForProjections()
        }
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id = \(UUID(uuidString: install)!)") == 0)
        #expect(try await harness.count("SELECT count(*)::int8 FROM projection_dead_letters") == 0)
        try await harness.expectRebuildEqualsActiveTables(backfill: true)
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }

    /// An archive of a closed month in `UPSHIFT_EXPORT_DIR` (written by `upshift log export --month`, retention
    /// off) that holds the install's events is rewritten without them, with a new checksum (`sha256sum -c`
    /// accepts it) and count; the system's gzip reads it.
    @Test func anArchiveThatHoldsAnErasedInstallIsRewrittenWithoutIt() async throws {
        let harness = try await Harness.make(now: Self.start)
        let (erased, kept) = (UUID(), UUID())
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-erasure-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        // September: closed by the clock's now (and the system's, which the CLI reads); its table made here.
        try await harness.sql { client in
            try await client.withConnection { connection in
                _ = try await connection.query("SELECT upshift_ensure_event_partitions('2026-09-01', '2026-09-01')", logger: TestEnvironment.logger)
                for day in 0..<3 {
                    for install in [erased, kept] {
                        let at = Date(timeIntervalSince1970: 1_788_432_000 + Double(day) * 86_400)  // 2026-09-03 10:40 UTC on
                        try await insertEvent(on: connection, app: "expenses", install: install, at: at, version: "1.0")
                    }
                }
            }
        }
        let exported = try await BinaryTests.command(
            ["log", "export", "--month", "2026-09", "--directory", folder.path], databaseURL: harness.databaseURL)
        #expect(exported.status == 0, "\(exported.error)")
        let name = "event_log_2026_09.copy.gz"
        #expect(try await Self.rows(of: folder.appendingPathComponent(name)).count == 6)
        var configuration = harness.configuration()
        configuration.projections.erasurePass = .milliseconds(200)
        configuration.exportDirectory = folder  // UPSHIFT_EXPORT_DIR, retention off
        try await harness.run(configuration) { server in
            let requested = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(erased)", key: harness.adminKey)
            _ = try await Self.waitUntilDone(try #require(try requested.json()["id"] as? String), server: server, harness: harness)
        }
        let rows = try await Self.rows(of: folder.appendingPathComponent(name))
        #expect(rows.count == 3)
        #expect(rows.allSatisfy { $0.contains(kept.uuidString.lowercased()) })
        #expect(!rows.contains { $0.contains(erased.uuidString.lowercased()) })
        #expect(try String(contentsOf: folder.appendingPathComponent(name + ".rows"), encoding: .utf8) == "3\n")
        #expect(try await RetentionTests.sha256sumAccepts(name + ".sha256", in: folder))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted() == [name, name + ".rows", name + ".sha256"])
        // September's days had closed when its events were read (they are older than ingestion takes): adoption
        // never counted them, and forgetting takes nothing out of them.
        try await harness.expectRebuildEqualsActiveTables(backfill: true, requireRows: false)
    }

    /// The lines of a gzipped file as the system's `gzip -dc` reads them.
    static func rows(of file: URL) async throws -> [String] {
        try await output(of: ["gzip", "-dc", file.path]).split(separator: "\n").map(String.init)
    }

    /// What a system command prints, run on a thread of its own (a process waited for on the concurrency
    /// pool's few threads would hold back every server of the run); a command that fails is an error.
    static func output(of arguments: [String]) async throws -> String {
        try await withCheckedThrowingContinuation { continuation in
            Thread {
                continuation.resume(
                    with: Result {
                        let process = Process()
                        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                        process.arguments = arguments
                        let output = Pipe()
                        process.standardOutput = output
                        try process.run()
                        let data = output.fileHandleForReading.readDataToEndOfFile()
                        process.waitUntilExit()
                        guard process.terminationStatus == 0 else { throw HarnessError("\(arguments.joined(separator: " ")) failed") }
                        return String(decoding: data, as: UTF8.self)
                    })
            }.start()
        }
    }

    /// `upshift installs forget` requests the erasure and, with `--wait`, returns once a running server
    /// has done it; `upshift installs erasure` shows it, never with the install id.
    @Test func theCLIRequestsAnErasureAndWaitsForIt() async throws {
        let harness = try await Harness.make(now: Self.start)
        let install = UUID()
        let events = (0..<3).map { day in
            clientEvent(occurredAt: Self.start.addingTimeInterval(-Double(day) * 86_400 - 60), install: install)
        }
        var configuration = harness.configuration()
        configuration.projections.erasurePass = .milliseconds(200)
        try await harness.run(configuration) { server in
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            let refused = try await BinaryTests.command(
                ["installs", "forget", "--app", "expenses", "--install", "nope"], databaseURL: harness.databaseURL)
            #expect(refused.status != 0)
            #expect(refused.error.contains("--install"))
            let forgotten = try await BinaryTests.command(
                ["installs", "forget", "--app", "expenses", "--install", install.uuidString, "--wait", "120"],
                databaseURL: harness.databaseURL)
            #expect(forgotten.status == 0, "\(forgotten.error)")
            let lines = forgotten.output.split(separator: "\n")
            #expect(lines.first?.hasSuffix("pending") == true, "\(forgotten.output)")
            #expect(lines.last?.contains("\tdone\t") == true, "\(forgotten.output)")
            #expect(lines.last?.contains("3 events erased") == true, "\(forgotten.output)")
            #expect(!forgotten.output.lowercased().contains(install.uuidString.lowercased()))
            let id = try #require(lines.first?.split(separator: " ").dropFirst().first.map(String.init))
            let shown = try await BinaryTests.command(["installs", "erasure", "--app", "expenses", id], databaseURL: harness.databaseURL)
            #expect(shown.status == 0)
            #expect(shown.output.contains("\tdone\t"))
        }
        #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id = \(install)") == 0)
        #expect(try await Self.adoptionTotal(harness) == 0)
    }

    /// Requests the erasure of `install` while a projection generation is held behind its events: two
    /// seconds later it is still `pending` and the log not yet erased. Its id.
    static func requestWhileHeld(_ install: String, server: Server, harness: Harness) async throws -> String {
        let requested = try await server.send(.DELETE, "/v1/apps/expenses/installs/\(install)", key: harness.adminKey)
        let id = try #require(try requested.json()["id"] as? String)
        try await Task.sleep(for: .seconds(2))
        let waiting = try await server.send(.GET, "/v1/apps/expenses/erasures/\(id)", key: harness.adminKey).json()
        #expect(waiting["status"] as? String == "pending")
        #expect(waiting["erasedAt"] == nil, "the log was erased before a generation held behind read the install's events")
        return id
    }

    /// Polls `GET …/erasures/{id}` until it is done (at most two minutes) and returns its body, which
    /// never holds the install id.
    /// With `install`, the SHA-256 it keeps must be that of the install id's text in lower case, as the
    /// system's `sha256sum` computes it.
    static func waitUntilDone(_ id: String, server: Server, harness: Harness, install: String? = nil) async throws -> [String: Any] {
        var body: [String: Any] = [:]
        try await Waits.until("erasure \(id) done", timeout: .seconds(120)) {
            let reply = try await server.send(.GET, "/v1/apps/expenses/erasures/\(id)", key: harness.adminKey)
            #expect(reply.status == 200)
            body = try reply.json()
            return body["status"] as? String == "done"
        }
        let sha = try #require(body["installSha256"] as? String)
        #expect(sha.count == 64)
        if let install {
            #expect(sha == (try await Self.sha256sum(install.lowercased())))
        }
        #expect(Set(body.keys).isSubset(of: ["id", "status", "installSha256", "requestedAt", "erasedAt", "events", "doneAt"]))
        return body
    }

    /// The hex SHA-256 of `text` as the system's `sha256sum` gives it.
    static func sha256sum(_ text: String) async throws -> String {
        try await output(of: ["sh", "-c", "printf %s \"$0\" | sha256sum", text]).split(separator: " ").first.map(String.init) ?? ""
    }

    /// Active installs summed over every day of the active adoption generation.
    static func adoptionTotal(_ harness: Harness) async throws -> Int {
        let generation = try await harness.count("SELECT generation::int8 FROM projections WHERE name = 'adoption' AND state = 'active'")
        return try await harness.count(
            "SELECT coalesce(sum(installs), 0)::int8 FROM \(ProjectionTables.name("adoption_daily", generation: generation))")
    }
}
