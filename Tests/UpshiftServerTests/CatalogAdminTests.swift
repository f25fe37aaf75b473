import Foundation
import NIOHTTP1
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

@Suite(.serverTimeLimit) struct CatalogAdminTests {
    static let release: JSONValue = .object([
        "platform": .string("ios"), "version": .string("2.4.0"), "releasedAt": .string("2026-01-01T00:00:00Z"),
        "minimumOSVersion": .string("16.0"), "notes": .object(["en": .array([.string("Faster sync")])]),
    ])

    @Test func badInputIsAProblemNamingTheField() async throws {
        let harness = try await Harness.make()
        try await harness.run { (server: Server) async throws in
            let key = harness.adminKey
            func field(_ json: JSONValue, _ path: String = "/v1/apps/expenses/releases", method: HTTPMethod = .POST, headers: [(String, String)] = [], as token: String? = nil, status: Int = 400) async throws -> JSONValue? {
                let reply = try await server.send(method, path, key: token ?? key, json: json, headers: headers)
                #expect(reply.status == status, "\(json)")
                return try reply.value()["field"]
            }
            func with(_ changes: [String: JSONValue]) -> JSONValue {
                var object = Self.release.objectValue!
                for (key, value) in changes { object[key] = value }
                return .object(object)
            }
            #expect(try await field(with(["version": .string("v2.4")])) == .string("version"))
            #expect(try await field(with(["rolloutPercent": .number(101)])) == .string("rolloutPercent"))
            #expect(try await field(with(["rolloutPercent": .number(-1)])) == .string("rolloutPercent"))
            #expect(try await field(with(["notes": .object(["english!": .array([])])])) == .string("notes.english!"))
            #expect(try await field(with(["releasedAt": .string("yesterday")])) == .string("releasedAt"))
            #expect(try await field(with(["channel": .string("nightly")])) == .string("channel"))
            // Each field valid alone, not together: 422.
            #expect(try await field(with(["minimumOSVersion": .string("17"), "maximumOSVersion": .string("16")]), status: 422) == .string("minimumOSVersion"))
            #expect(try await field(with(["minimumVerison": .string("1")])) == .string("minimumVerison"))
            let policy = "/v1/apps/expenses/policies/ios"
            let ifMatch = [("If-Match", "\"0\"")]
            #expect(try await field(.object(["enabled": .bool(true), "minimumVersion": .string("3.0"), "targetVersion": .string("2.0")]), policy, method: .PUT, headers: ifMatch, status: 422) == .string("minimumVersion"))
            #expect(try await field(.object(["minimumVersion": .string("3.0")]), policy, method: .PUT, headers: ifMatch) == .string("enabled"))
            #expect(try await field(.object(["enabled": .bool(true), "blockedVersions": .array([.string("x")])]), policy, method: .PUT, headers: ifMatch) == .string("blockedVersions[0]"))
            #expect(try await field(.object(["enabled": .bool(true), "versionsBehindThreshold": .number(0)]), policy, method: .PUT, headers: ifMatch) == .string("versionsBehindThreshold"))
            #expect(try await field(.object(["id": .string("Bad App"), "name": .string("x")]), "/v1/apps", as: harness.rootKey) == .string("id"))
            #expect(try await field(.object(["id": .string("ok"), "name": .string("x"), "defaultLocale": .string("no locale")]), "/v1/apps", as: harness.rootKey) == .string("defaultLocale"))
        }
    }

    /// A date whose instant falls outside years 0000–9999 (an offset carrying it over the edge) is
    /// refused naming `releasedAt`: stored, it would be written back as text no reader accepts.
    @Test func releaseDatesOutsideTheYearsTheAPIWritesAreRefused() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let key = harness.adminKey
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: Self.release).status == 201)
            for text in ["9999-12-31T23:59:59-00:01", "0000-01-01T00:00:00+00:01", "9999-12-31T23:59:59.9996Z"] {
                var release = Self.release.objectValue!
                release["version"] = .string("3.0")
                release["releasedAt"] = .string(text)
                let added = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object(release))
                #expect(added.status == 400, "\(text)")
                #expect(try added.value()["field"] == .string("releasedAt"), "\(text)")
                let patched = try await server.send(
                    .PATCH, "/v1/apps/expenses/releases/ios/2.4.0", key: key, json: .object(["releasedAt": .string(text)]),
                    headers: [("If-Match", "\"1\"")])
                #expect(patched.status == 400, "\(text)")
                #expect(try patched.value()["field"] == .string("releasedAt"), "\(text)")
            }
            // The edges themselves are taken, and read back as written.
            for (version, text) in [("4.0", "9999-12-31T23:59:59.999Z"), ("5.0", "0000-01-01T00:00:00-00:01")] {
                var release = Self.release.objectValue!
                release["version"] = .string(version)
                release["releasedAt"] = .string(text)
                #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object(release)).status == 201)
            }
            let listed = try await server.send(.GET, "/v1/apps/expenses/releases?platform=ios", key: key)
            #expect(listed.status == 200)
            let dates = try listed.value()["releases"]?.arrayValue?.compactMap { $0["releasedAt"]?.stringValue } ?? []
            #expect(Set(dates).isSuperset(of: ["9999-12-31T23:59:59.999Z", "0000-01-01T00:01:00.000Z"]))
        }
    }

    /// A stored row that cannot be read (written by an older, laxer server, or by hand) leaves out its
    /// own app only: the server starts, every other app is served and its writes reach the checks, the
    /// app keeps its last good catalog while the server runs, and a metric counts it.
    /// The rows that make an app unreadable: a release date past the years the API writes, a platform
    /// that breaks the rule as a key of the app's store URLs, and as a policy's platform.
    static let corruptions = [
        "UPDATE releases SET release = jsonb_set(release, '{releasedAt}', '\"10000-01-01T00:00:59.000Z\"') WHERE app_id = 'broken'",
        "UPDATE apps SET update_urls = '{\"IOS\": \"https://example.com\"}' WHERE app_id = 'broken'",
        "INSERT INTO policies (app_id, platform, policy, revision) VALUES ('broken', 'IOS', '{\"enabled\": true}', 1)",
    ]

    @Test(arguments: corruptions)
    func anUnreadableAppNeverTakesTheOtherAppsCatalogsDown(corruption: String) async throws {
        let harness = try await Harness.make()
        @Sendable func check(_ server: Server, _ app: String) async throws -> Server.Reply {
            try await server.request(.GET, "/v1/apps/\(app)/check?platform=ios&version=1.0")
        }
        @Sendable func corrupt() async throws {
            // Year 10000, as `Timestamp.format` wrote a date that `parse` once let through; written as a
            // write of such a server would be, moving the app's stream head (reloads read the apps whose
            // head moved).
            _ = try await harness.count(
                PostgresQuery(
                    unsafeSQL: """
                        WITH changed AS (\(corruption) RETURNING 1),
                             moved AS (UPDATE streams SET version = version + 1 WHERE stream_id = 'app:broken' RETURNING 1)
                        SELECT (SELECT count(*) FROM changed)::int + (SELECT count(*) FROM moved)::int
                        """))
        }
        try await harness.run { server in
            let created = try await server.send(
                .POST, "/v1/apps", key: harness.rootKey, json: .object(["id": .string("broken"), "name": .string("Broken")]))
            #expect(created.status == 201)
            #expect(try await server.send(.POST, "/v1/apps/broken/releases", key: harness.rootKey, json: Self.release).status == 201)
            #expect(try await check(server, "broken").value()["latestVersion"] == .string("2.4.0"))
            try await corrupt()
            // A write to another app reloads the snapshot: that app's change is served, and the
            // unreadable one answers from its last good catalog.
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release).status == 201)
            #expect(try await check(server, "expenses").value()["latestVersion"] == .string("2.4.0"))
            #expect(try await check(server, "broken").value()["latestVersion"] == .string("2.4.0"))
            #expect(try await server.metric("upshift_catalog_apps_undecodable") == 1)
        }
        // `upshift serve` restarted on the same database: it starts, serves the other app, and has nothing
        // for this one.
        let port = try await freePort()
        let process = try ServerProcess(database: harness.database, port: port)
        try await process.start()
        let server = Server(port: port)
        #expect(try await check(server, "expenses").value()["latestVersion"] == .string("2.4.0"))
        #expect(try await check(server, "broken").status == 404)
        #expect(try await server.metric("upshift_catalog_apps_undecodable") == 1)
        #expect(process.log().contains("broken"))
        #expect(await process.terminate() == 0)
    }

    @Test func revisionsGuardEveryEdit() async throws {
        let harness = try await Harness.make()
        try await harness.run { (server: Server) async throws in
            let key = harness.adminKey
            let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: Self.release)
            #expect(created.status == 201)
            #expect(created.etag == "\"1\"")
            // Equal versions are the same release: 2.4 is 2.4.0.
            var duplicate = Self.release.objectValue!
            duplicate["version"] = .string("2.4")
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object(duplicate)).status == 409)

            let path = "/v1/apps/expenses/releases/ios/2.4"
            let pause: JSONValue = .object(["rolloutPaused": .bool(true), "reason": .string("crash spike")])
            #expect(try await server.send(.PATCH, path, key: key, json: pause).status == 428)
            #expect(try await server.send(.PATCH, path, key: key, json: pause, headers: [("If-Match", "\"7\"")]).status == 412)
            let paused = try await server.send(.PATCH, path, key: key, json: pause, headers: [("If-Match", "\"1\"")])
            #expect(paused.status == 200)
            #expect(paused.etag == "\"2\"")
            #expect(try paused.value()["rolloutPaused"] == .bool(true))
            #expect(try await server.send(.PATCH, "/v1/apps/expenses/releases/ios/9.9", key: key, json: pause, headers: [("If-Match", "\"1\"")]).status == 404)
            // One release, with the ETag its next edit needs (any spelling of its version; read tokens too).
            let read = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.4.0", key: harness.readKey)
            #expect(read.status == 200)
            #expect(read.etag == "\"2\"")
            #expect(try read.value()["rolloutPaused"] == .bool(true))
            let etag = try #require(read.etag)
            let resume: JSONValue = .object(["rolloutPaused": .bool(false)])
            #expect(try await server.send(.PATCH, path, key: key, json: resume, headers: [("If-Match", etag)]).status == 200)
            #expect(try await server.send(.GET, "/v1/apps/expenses/releases/ios/9.9", key: key).status == 404)
            #expect(try await server.send(.GET, "/v1/apps/expenses/releases/android/2.4", key: key).status == 404)
            #expect(try await server.send(.GET, "/v1/apps/expenses/releases/ios/v2", key: key).status == 400)
            #expect(try await server.send(.GET, "\(path)?x=1", key: key).status == 400)
            #expect(try await server.send(.GET, path, key: nil).status == 401)

            let policyPath = "/v1/apps/expenses/policies/ios"
            let unset = try await server.send(.GET, policyPath, key: key)
            #expect(unset.etag == "\"0\"")
            #expect(try unset.value()["enabled"] == .bool(true))
            let policy: JSONValue = .object(["enabled": .bool(true), "minimumVersion": .string("3.0")])
            #expect(try await server.send(.PUT, policyPath, key: key, json: policy).status == 428)
            let replaced = try await server.send(.PUT, policyPath, key: key, json: policy, headers: [("If-Match", "\"0\"")])
            #expect(replaced.status == 200)
            // A minimum above every live release is allowed, with a warning.
            #expect(try replaced.value()["warnings"] != nil)
            #expect(try await server.send(.PUT, policyPath, key: key, json: policy, headers: [("If-Match", "\"0\"")]).status == 412)

            // Tokens: a read token reads but cannot write; another app's admin cannot touch this one.
            #expect(try await server.send(.GET, policyPath, key: harness.readKey).status == 200)
            #expect(try await server.send(.PUT, policyPath, key: harness.readKey, json: policy, headers: [("If-Match", "\"1\"")]).status == 403)
            #expect(try await server.send(.POST, "/v1/apps", key: harness.adminKey, json: .object(["id": .string("other"), "name": .string("O")])).status == 403)
            #expect(try await server.send(.POST, "/v1/apps", key: harness.rootKey, json: .object(["id": .string("other"), "name": .string("O")])).status == 201)
            #expect(try await server.send(.POST, "/v1/apps", key: harness.rootKey, json: .object(["id": .string("other"), "name": .string("O")])).status == 409)
            #expect(try await server.send(.GET, "/v1/apps/other", key: harness.adminKey).status == 403)
            #expect(try await server.send(.GET, "/v1/apps/expenses", key: nil).status == 401)
        }
    }

    @Test func twoAdminsWithTheSameIfMatchExactlyOneWins() async throws {
        let harness = try await Harness.make()
        try await harness.run { (server: Server) async throws in
            for round in 0..<5 {
                let statuses = try await withThrowingTaskGroup(of: Int.self) { group in
                    for admin in 0..<2 {
                        group.addTask {
                            try await server.send(
                                .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                                json: .object(["enabled": .bool(true), "minimumVersion": .string("1.\(round).\(admin)")]),
                                headers: [("If-Match", "\"\(round)\"")]
                            ).status
                        }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                #expect(statuses.sorted() == [200, 412], "round \(round): \(statuses)")
            }
        }
        #expect(try await harness.count("SELECT revision FROM policies WHERE app_id = 'expenses'") == 5)
    }

    @Test func historyShowsWhoWhatWhyAndTheEventsRebuildTheTables() async throws {
        let harness = try await Harness.make()
        try await harness.run { (server: Server) async throws in
            let key = harness.adminKey
            var release = Self.release.objectValue!
            release["reason"] = .string("spring release")
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object(release)).status == 201)
            #expect(try await server.send(
                .PATCH, "/v1/apps/expenses/releases/ios/2.4.0", key: key,
                json: .object(["rolloutPercent": .number(25), "reason": .string("staged")]), headers: [("If-Match", "\"1\"")]).status == 200)
            #expect(try await server.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "minimumVersion": .string("2.4"), "reason": .string("crash in 2.3.x")]),
                headers: [("If-Match", "\"0\"")]).status == 200)

            let history = try await server.send(.GET, "/v1/apps/expenses/history?limit=2", key: harness.readKey).value()
            guard case .array(let entries) = history["entries"] else { Issue.record("no entries"); return }
            #expect(entries.map { $0["type"] } == [.string("policy_replaced"), .string("release_updated")])
            #expect(entries[0]["actor"]?.stringValue?.hasPrefix("owner (") == true)
            #expect(entries[0]["reason"] == .string("crash in 2.3.x"))
            #expect(entries[0]["changes"]?["minimumVersion"]?["to"] == .string("2.4"))
            #expect(entries[1]["changes"]?["rolloutPercent"] == .object(["from": .number(100), "to": .number(25)]))
            guard case .number(let next) = history["nextBefore"] else { Issue.record("no next page"); return }
            let older = try await server.send(.GET, "/v1/apps/expenses/history?before=\(next)", key: key).value()
            guard case .array(let rest) = older["entries"] else { Issue.record("no older entries"); return }
            #expect(rest.map { $0["type"] } == [.string("release_added"), .string("app_created")])
            #expect(rest[0]["reason"] == .string("spring release"))
            #expect(older["nextBefore"] == nil)  // exactly two older entries: no empty third page
            // An app edit is folded too (the app as the event carries it, revision included).
            #expect(try await server.send(
                .PATCH, "/v1/apps/expenses", key: key,
                json: .object(["name": "Expenses 2", "bundleId": .object(["ios": "com.example.expenses"])]),
                headers: [("If-Match", "\"1\"")]).status == 200)
        }
        // The catalog folded from the app: events equals the catalog tables.
        let (tables, events) = try await harness.sql { client in
            let store = CatalogStore(client: client, logger: TestEnvironment.logger)
            return (try await store.loadAll().apps["expenses"], try await store.events(appId: "expenses"))
        }
        var rebuilt: AppCatalog?
        for event in events { event.apply(to: &rebuilt) }
        #expect(events.count == 5)
        #expect(rebuilt != nil && rebuilt?.app.revision == 2 && rebuilt?.app.name == "Expenses 2")
        #expect(rebuilt == tables)
    }

    /// A stored catalog event this server cannot read (a type from a newer version, data that does not
    /// decode) is listed as undecodable with its stream version and type, in the API and on the dashboard:
    /// the history answers 200 with every other change around it.
    @Test func anUndecodableCatalogEventIsListedNeverA500() async throws {
        let harness = try await Harness.make()
        try await harness.sql { client in
            for (version, type, data) in [(2, "release_updated", #"{"release": 7}"#), (3, "app_archived", #"{"actor": "future"}"#)] {
                _ = try await client.query(
                    """
                    INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data)
                    VALUES (gen_random_uuid(), now(), now(), 'expenses', \(type), 'app:expenses', \(version), \(data)::jsonb)
                    """)
            }
        }
        try await harness.run { (server: Server) async throws in
            let reply = try await server.send(.GET, "/v1/apps/expenses/history", key: harness.readKey)
            #expect(reply.status == 200, "\(reply.text)")
            guard case .array(let entries) = try reply.value()["entries"] else { Issue.record("no entries"); return }
            #expect(entries.map { $0["version"] } == [.number(3), .number(2), .number(1)])
            #expect(entries.map { $0["type"] } == [.string("app_archived"), .string("release_updated"), .string("app_created")])
            #expect(entries[0]["undecodable"] == .string("unknown event type"))
            #expect(entries[1]["undecodable"] == .string("its data does not decode as release_updated"))
            #expect(entries[0]["actor"] == .string("unknown") && entries[1]["changes"] == .object([:]))
            #expect(entries[2]["undecodable"] == nil)
            var browser = DashboardTests.Browser(server: server)
            #expect(try await browser.signIn(harness.readKey).status == 303)
            let page = try await browser.get("/dashboard/apps/expenses/history")
            #expect(page.status == 200)
            #expect(page.text.contains("<b>undecodable</b>: unknown event type (stream version 3)"), "\(page.text)")
        }
    }
}
