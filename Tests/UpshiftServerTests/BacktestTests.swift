import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport
import UpshiftWire

/// The policy backtest (`POST /v1/apps/{app}/preview`, docs/ARCHITECTURE.md "The policy backtest"): for a
/// generated fleet, its "today" equals what `GET /check` answers each install now, and its "proposed"
/// equals what the check answers once the change is applied; it writes nothing and names bad fields.
@Suite(.serverTimeLimit) struct BacktestTests {
    static let start = Timestamp.parse("2026-07-01T12:00:00Z")!

    struct Install {
        var id: String
        var version: String
        var os: String?
        /// The channel of its latest check; nil: it never checked (counted as live).
        var checked: UpshiftCore.Channel?
    }

    /// Answers by version and OS, as the backtest groups them: action and reason counts per row.
    struct Tally: Equatable, CustomStringConvertible {
        var rows: [String: [String: Int]] = [:]
        mutating func add(_ install: Install, _ answer: JSONValue) {
            let key = "\(Version(install.version)!.normalized) \(install.os ?? "-")"
            for name in [answer["action"]?.stringValue ?? "?", "reason " + (answer["reason"]?.stringValue ?? "?")] {
                rows[key, default: [:]][name, default: 0] += 1
            }
        }
        /// The same counts from one side (`today` or `proposed`) of the backtest's rows.
        init(report: JSONValue, side: String) {
            for row in report["rows"]?.arrayValue ?? [] {
                let key = "\(row["version"]?.stringValue ?? "?") \(row["osVersion"]?.stringValue ?? "-")"
                let tally = row[side]
                for action in ["force", "soft", "none"] {
                    if let count = tally?[action]?.intValue, count > 0 { rows[key, default: [:]][action] = count }
                }
                for (reason, count) in tally?["reasons"]?.objectValue ?? [:] {
                    if let count = count.intValue, count > 0 { rows[key, default: [:]]["reason " + reason] = count }
                }
            }
        }
        init() {}
        var description: String { rows.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.sorted { $0.key < $1.key })" }.joined(separator: "\n") }
    }

    static func fleet() -> [Install] {
        var random = SplitMix64(seed: 21)
        return (0..<120).map { _ in
            Install(
                id: random.uuid(), version: ["1.0", "1.1", "2.0", "2.0"][Int(random.next() % 4)],
                os: ["15.0", "17.2", nil][Int(random.next() % 3)],
                checked: [UpshiftCore.Channel.beta, .live, nil, nil][Int(random.next() % 4)])
        }
    }

    /// A catalog and a change to it: its releases (version, days ago, rollout percent, minimum OS,
    /// channel) and the release changes proposed and then applied, beside a minimum of 1.1.
    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var releases: [(String, Double, Double, String, String)]
        var changes: [String: JSONValue]
        /// Whether some answer depends on the install's bucket (a partial rollout today).
        var staged: Bool
        /// Releases proposed that are not in the catalog yet (`newReleases`), added once applied.
        var newReleases: [JSONValue] = []
        var testDescription: String { name }
    }

    static let scenarios = [
        // 2.0 staged at 30 %, 2.1 staged at 50 % (needs iOS 16), a beta for those who ask for it; proposed:
        // 2.0 widened to 60 %, 2.1 halted. The installs are read one by one.
        Scenario(
            name: "staged rollouts and a beta",
            releases: [
                ("1.0", 60, 100, "14.0", "live"), ("1.1", 30, 100, "14.0", "live"), ("2.0", 10, 30, "14.0", "live"),
                ("2.1", 5, 50, "16.0", "live"), ("2.2.0-beta.1", 2, 100, "14.0", "beta"),
            ],
            changes: ["2.0": .object(["rolloutPercent": .number(60)]), "2.1": .object(["rolloutAction": .string("halt")])],
            staged: true),
        // The same staged rollouts without the beta: the installs are read one by one, their channels not.
        Scenario(
            name: "staged rollouts, no beta",
            releases: [
                ("1.0", 60, 100, "14.0", "live"), ("1.1", 30, 100, "14.0", "live"), ("2.0", 10, 30, "14.0", "live"),
                ("2.1", 5, 50, "16.0", "live"),
            ],
            changes: ["2.0": .object(["rolloutPercent": .number(60)]), "2.1": .object(["rolloutAction": .string("halt")])],
            staged: true),
        // Every rollout whole, no beta: neither bucket nor channel matters, and the installs are counted
        // from the projection's installs per day and hour. Proposed: 2.1 halted.
        Scenario(
            name: "whole rollouts, no beta",
            releases: [
                ("1.0", 60, 100, "14.0", "live"), ("1.1", 30, 100, "14.0", "live"), ("2.0", 10, 100, "14.0", "live"),
                ("2.1", 5, 100, "16.0", "live"),
            ],
            changes: ["2.1": .object(["rolloutAction": .string("halt")])],
            staged: false),
        // "What happens when I ship 2.1 and a staged 2.2 with a minimum of 1.1?": releases not in the
        // catalog yet.
        Scenario(
            name: "new releases",
            releases: [("1.0", 60, 100, "14.0", "live"), ("1.1", 30, 100, "14.0", "live"), ("2.0", 10, 100, "14.0", "live")],
            changes: [:], staged: false,
            newReleases: [
                .object([
                    "platform": "ios", "version": "2.1", "minimumOSVersion": "16.0",
                    "releasedAt": .string(Timestamp.format(start.addingTimeInterval(-86_400))),
                ]),
                .object([
                    "platform": "ios", "version": "2.2", "rolloutPercent": .number(40), "minimumOSVersion": "14.0",
                    "releasedAt": .string(Timestamp.format(start.addingTimeInterval(-3_600))), "reason": "the big one",
                ]),
            ]),
    ]

    @Test(arguments: scenarios)
    func todayIsWhatTheCheckAnswersAndProposedIsWhatItAnswersOnceApplied(_ scenario: Scenario) async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = Self.fleet()
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0  // every install asks from loopback
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            for (version, daysAgo, percent, os, channel) in scenario.releases {
                let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                    "platform": .string("ios"), "version": .string(version), "channel": .string(channel),
                    "releasedAt": .string(Timestamp.format(Self.start.addingTimeInterval(-daysAgo * 86_400))),
                    "rolloutPercent": .number(JSONNumber(percent)), "minimumOSVersion": .string(os),
                ]))
                #expect(created.status == 201)
            }
            // The fleet: each launched within the week, some checked since (their channel is that check's).
            var events: [[String: String]] = []
            for (index, install) in fleet.enumerated() {
                var event = [
                    "id": UUID().uuidString, "type": "launched", "installId": install.id, "platform": "ios",
                    "appVersion": install.version,
                    "occurredAt": Timestamp.format(Self.start.addingTimeInterval(-Double(index % 6 + 1) * 86_400)),
                ]
                event["osVersion"] = install.os
                events.append(event)
            }
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            func check(_ install: Install, channel: UpshiftCore.Channel?) async throws -> JSONValue {
                var query = "/v1/apps/expenses/check?platform=ios&version=\(install.version)&install=\(install.id)"
                if let os = install.os { query += "&os=\(os)" }
                if let channel { query += "&channel=\(channel.rawValue)" }
                let reply = try await server.request(.GET, query)
                #expect(reply.status == 200)
                return try reply.value()
            }
            for install in fleet {
                if let channel = install.checked { _ = try await check(install, channel: channel) }
            }
            // One install last seen 10 days ago: outside the window, not counted.
            let old = ["id": UUID().uuidString, "type": "launched", "installId": UUID().uuidString.lowercased(),
                       "platform": "ios", "appVersion": "1.0", "occurredAt": Timestamp.format(Self.start.addingTimeInterval(-10 * 86_400))]
            #expect(try await server.postEvents([old], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()

            // Proposed: a minimum of 1.1 and the scenario's release changes.
            let proposal: JSONValue = .object([
                "policy": .object(["enabled": .bool(true), "minimumVersion": .string("1.1")]),
                "releases": .object(scenario.changes), "newReleases": .array(scenario.newReleases),
            ])
            let preview = try await server.send(.POST, "/v1/apps/expenses/preview?platform=ios", key: harness.readKey, json: proposal)
            #expect(preview.status == 200, "\(preview.text)")
            let report = try preview.value()
            #expect(report["installs"]?.intValue == fleet.count, "installs active in the last 7 days")
            #expect(report["windowDays"]?.intValue == 7)

            // Today: what the check answers each install now, with the channel of its latest check.
            var today = Tally()
            var answers: [String: JSONValue] = [:]
            for install in fleet {
                let answer = try await check(install, channel: install.checked)
                answers[install.id] = answer
                today.add(install, answer)
            }
            #expect(Tally(report: report, side: "today") == today, "backtest:\n\(Tally(report: report, side: "today"))\nchecks:\n\(today)")
            // Nothing was written: the policy is still never set.
            #expect(try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: key).etag == "\"0\"")

            // Applied: the check answers what the backtest proposed, and the changed answers are counted.
            #expect(try await server.send(.PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "minimumVersion": .string("1.1")]), headers: [("If-Match", "\"0\"")]).status == 200)
            for (version, change) in scenario.changes {
                #expect(try await server.send(.PATCH, "/v1/apps/expenses/releases/ios/\(version)", key: key,
                    json: change, headers: [("If-Match", "\"1\"")]).status == 200)
            }
            for release in scenario.newReleases {
                #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: release).status == 201)
            }
            // Nothing of the proposal existed before it was applied.
            #expect(scenario.newReleases.isEmpty || report["today"] != report["proposed"])
            var proposed = Tally()
            var changed = 0
            for install in fleet {
                let answer = try await check(install, channel: install.checked)
                proposed.add(install, answer)
                let before = answers[install.id]!
                if ["action", "reason", "latestVersion"].contains(where: { before[$0] != answer[$0] }) { changed += 1 }
            }
            #expect(Tally(report: report, side: "proposed") == proposed, "backtest:\n\(Tally(report: report, side: "proposed"))\nchecks:\n\(proposed)")
            #expect(report["changed"]?.intValue == changed)
            #expect(changed > 10, "the change moves many answers: \(changed)")
            #expect(((report["today"]?["reasons"]?["not_in_rollout"]?.intValue ?? 0) > 0) == scenario.staged, "staged rollouts decide per install")
        }
    }

    @Test func badProposalsNameTheirFieldAndOnlyReadersMayAsk() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
                "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-06-01T00:00:00Z"),
            ]))
            try await harness.waitForProjections()
            func preview(_ body: JSONValue, key: String? = nil, query: String = "platform=ios") async throws -> Server.Reply {
                try await server.send(.POST, "/v1/apps/expenses/preview?\(query)", key: key ?? harness.readKey, json: body)
            }
            let cases: [(JSONValue, Int, String)] = [
                (.object(["policy": .object(["enabled": .bool(true), "minimumVersion": .string("one")])]), 400, "policy.minimumVersion"),
                (.object(["policy": .object(["minimumVersion": .string("1.0")])]), 400, "policy.enabled"),
                (.object(["releases": .object(["2.0": .object(["rolloutPercent": .number(101)])])]), 400, "releases.2.0.rolloutPercent"),
                (.object(["releases": .object(["2.0": .object(["rolloutAction": .string("pause")])])]), 422, "releases.2.0.rolloutAction"),
                (.object(["releases": .object(["2.0": .object(["rolloutSchedule": .string("fast")])])]), 400, "releases.2.0.rolloutSchedule"),
                (.object(["policy": .object(["enabled": .bool(true)]), "minimum": .string("2.0")]), 400, "minimum"),
                (.array([]), 400, "body"),
                (.object(["policy": .object(["enabled": .bool(true), "reason": .string("a\u{0F}b")])]), 400, "policy.reason"),
                (.object(["releases": .object(["2.0": .object(["reason": .number(1)])])]), 400, "releases.2.0.reason"),
                (.object(["newReleases": .array([.object(["platform": "ios", "version": "v3", "releasedAt": "2026-06-01T00:00:00Z"])])]),
                 400, "newReleases[0].version"),
                (.object(["newReleases": .array([.object(["platform": "ios", "version": "3.0"])])]), 400, "newReleases[0].releasedAt"),
                (.object(["newReleases": .array([.object(["platform": "ios", "version": "3.0", "releasedAt": "2026-06-01T00:00:00Z",
                                                          "rolloutPercent": .number(101)])])]), 400, "newReleases[0].rolloutPercent"),
                (.object(["newReleases": .array([.object(["platform": "android", "version": "3.0", "releasedAt": "2026-06-01T00:00:00Z"])])]),
                 422, "newReleases[0].platform"),
                (.object(["newReleases": .array(Array(repeating: .object([:]), count: 11))]), 400, "newReleases"),
                (.object(["newReleases": .object([:])]), 400, "newReleases"),
                (.object(["newReleases": .array([.object(["platform": "ios", "version": "2.0.0", "releasedAt": "2026-06-01T00:00:00Z"])])]),
                 409, ""),
                (.object(["newReleases": .array([
                    .object(["platform": "ios", "version": "3.0", "releasedAt": "2026-06-01T00:00:00Z"]),
                    .object(["platform": "ios", "version": "3.0.0", "releasedAt": "2026-06-02T00:00:00Z"]),
                ])]), 409, ""),
            ]
            for (body, status, field) in cases {
                let reply = try await preview(body)
                #expect(reply.status == status, "\(body): \(reply.text)")
                #expect(try reply.value()["field"]?.stringValue ?? "" == field, "\(body)")
            }
            // `releases` still edits existing releases only, even one the same body proposes anew.
            let editNew = try await preview(.object([
                "newReleases": .array([.object(["platform": "ios", "version": "3.0", "releasedAt": "2026-06-01T00:00:00Z"])]),
                "releases": .object(["3.0": .object(["rolloutPercent": .number(50)])]),
            ]))
            #expect(editNew.status == 404)
            // Hostile bodies, raw: a huge number, NUL, over-long, the wrong type, sent twice.
            let long = String(repeating: "9", count: 100_000)
            let hostile = [
                #"{"releases": {"2.0": {"rolloutPercent": 1e999}}}"#, #"{"releases": {"2.0\#u{0}": {}}}"#,
                "{\"releases\": {\"\(long)\": {}}}", #"{"policy": "strict"}"#, #"{"releases": ["2.0"]}"#,
                #"{"policy": {"enabled": true}, "policy": {"enabled": false}}"#,
                #"{"releases": {"2.0": {"rolloutAction": "halt"}, "2.0": {"rolloutAction": "release"}}}"#,
                "{\"policy\": {\"enabled\": true, \"minimumVersion\": \"\(long)\"}}",
            ]
            for body in hostile {
                let reply = try await server.request(
                    .POST, "/v1/apps/expenses/preview?platform=ios",
                    headers: [("Authorization", "Bearer \(harness.readKey)"), ("Content-Type", "application/json")], body: Data(body.utf8))
                #expect(reply.status == 400, "\(body.prefix(120)): \(reply.status)")
            }
            #expect(try await preview(.object([:]), query: "platform=ios&window=99999999999999999999").status == 400)
            #expect(try await preview(.object([:]), query: "platform=ios&platform=android").status == 400, "sent twice")
            let unknown = try await preview(.object(["releases": .object(["9.9": .object([:])])]))
            #expect(unknown.status == 404, "a release the platform does not have, as for its PATCH")
            #expect(try await preview(.object([:]), query: "window=7").status == 400, "platform is required")
            #expect(try await preview(.object([:]), query: "platform=ios&window=91").status == 400)
            let empty = try await preview(.object([:]))
            #expect(empty.status == 200)
            #expect(try empty.value()["changed"]?.intValue == 0, "no change, no changed answer")
            #expect(try await preview(.object([:]), key: harness.ingestKey).status == 403)
            #expect(try await preview(.object([:]), key: harness.adminKey).status == 200)
        }
    }

    /// A large `install_state` is read in two halves of its pages at once, on two connections that share
    /// one snapshot: while installs move between the halves (an update writes the row anew elsewhere in
    /// the table), each read still counts every install exactly once, and the halves give what one pass
    /// gives, also when the pool cannot lend the second connection (the second half then follows the first).
    @Test func theIdsReadInTwoHalvesAreTheInstallsOfOnePass() async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = 3_000  // about 60 pages of install_state: halves, and rows to move between them
        try await harness.run { server in
            var random = SplitMix64(seed: 4)
            let installs = (0..<fleet).map { _ in random.uuid() }
            for part in stride(from: 0, to: fleet, by: 300) {
                let events = installs[part..<min(part + 300, fleet)].enumerated().map { index, install in
                    [
                        "id": UUID().uuidString, "type": "launched", "installId": install, "platform": "ios",
                        "appVersion": ["1.0", "1.1", "2.0"][index % 3], "osVersion": ["15.0", "17.2"][index % 2],
                        "occurredAt": Timestamp.format(Self.start.addingTimeInterval(-Double(index % 5 + 1) * 3_600)),
                    ]
                }
                #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            }
            // Every projection folds the fleet while every other untagged suite shares the two cores: the
            // bound catches a runner that stopped, not one that is slow.
            try await harness.waitForProjections(timeout: .seconds(300))
        }
        typealias Read = (counts: [Backtest.Cohort: Int], installs: [Backtest.Cohort: Set<UUID>])
        let since = Self.start.addingTimeInterval(-7 * 86_400)
        // Ids for 1.0 and 1.1 (below a partial 2.0), counts for 2.0.
        let below = Backtest.IDsBelow(live: Version("2.0"), beta: Version("2.0")!)
        @Sendable func read(_ store: ReportStore, channelMatters: Bool = true) async throws -> Read {
            let found = try await store.backtestInstalls(
                app: "expenses", platform: "ios", since: since, idsBelow: below, channelMatters: channelMatters)
            var installs: [Backtest.Cohort: Set<UUID>] = [:]
            for (cohort, ids) in found.value.installs {
                installs[cohort, default: []].formUnion((0..<ids.count).map { ids.id(at: $0) })
            }
            return (found.value.counts, installs)
        }
        // Without a partial rollout: counts alone, read in halves too.
        @Sendable func counts(_ store: ReportStore) async throws -> [Backtest.Cohort: Int] {
            let found = try await store.backtestInstalls(app: "expenses", platform: "ios", since: since, idsBelow: nil)
            #expect(found.value.installs.isEmpty)
            return found.value.counts
        }
        @Sendable func total(_ read: Read) -> Int { read.counts.values.reduce(0, +) + read.installs.values.map(\.count).reduce(0, +) }
        let logger = TestEnvironment.logger
        // A wait long enough for a first connection on a busy machine; the pool of one lends its only
        // connection to the first half, so the second waits this long before it takes its turn.
        let bounds = DatabasePool.Bounds(wait: .seconds(2), answer: .seconds(60))
        let two = DatabasePool(name: "two", settings: harness.database, connections: 2, bounds: bounds, logger: logger)
        let one = DatabasePool(name: "one", settings: harness.database, connections: 1, bounds: bounds, logger: logger)
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await two.client.run() }
            group.addTask { await one.client.run() }
            defer { group.cancelAll() }
            for pool in [two, one] { try await pool.query("SELECT 1", logger: logger) }
            let onePass = try await read(ReportStore(client: two.client, logger: logger))
            #expect(total(onePass) == fleet)
            #expect(onePass.installs.keys.map(\.version).sorted() == ["1.0.0", "1.0.0", "1.1.0", "1.1.0"], "ids by version and OS")
            #expect(Set(onePass.installs.values.joined()).count == 2 * fleet / 3)
            let countsInOnePass = try await counts(ReportStore(client: two.client, logger: logger))
            #expect(countsInOnePass.values.reduce(0, +) == fleet)
            #expect(countsInOnePass.count == 6, "three versions by two OS versions")
            // Where channels do not matter, the counts come from the projection's installs per day and
            // hour, and the rest of the window's first hour: the same as the installs read one by one.
            for (hours, active) in [(7.0 * 24, fleet), (3.5, 3 * fleet / 5), (2, 2 * fleet / 5)] {
                let store = ReportStore(client: two.client, logger: logger)
                let since = Self.start.addingTimeInterval(-hours * 3_600)
                let scanned = try await store.backtestInstalls(app: "expenses", platform: "ios", since: since, idsBelow: nil)
                let counted = try await store.backtestInstalls(
                    app: "expenses", platform: "ios", since: since, idsBelow: nil, channelMatters: false)
                #expect(scanned.value.counts.values.reduce(0, +) == active, "since \(hours) h before")
                #expect(counted.value.counts == scanned.value.counts, "since \(hours) h before")
                #expect(counted.dataAsOf == scanned.dataAsOf)
            }
            let halves = ReportStore(pool: two, logger: logger, backtestSplitPages: 0)
            let halvesInTurn = ReportStore(pool: one, logger: logger, backtestSplitPages: 0)
            for store in [halves, halvesInTurn] {
                let split = try await read(store)
                #expect(split.counts == onePass.counts)
                #expect(split.installs == onePass.installs)
                // No install here ever checked: read without their channels, every cohort is the same.
                let liveOnly = try await read(store, channelMatters: false)
                #expect(liveOnly.counts == onePass.counts && liveOnly.installs == onePass.installs)
                #expect(try await counts(store) == countsInOnePass)
            }
            // Installs moving from page to page meanwhile: widening a row moves it to the table's end.
            let table = try await harness.sql { client in
                for try await generation in try await client.query(
                    "SELECT generation FROM projections WHERE name = 'install_state' AND state = 'active'").decode(Int.self) {
                    return ProjectionTables.name("install_state", generation: generation)
                }
                throw CancellationError()
            }
            let moved = try await withPostgres(harness.database, maximumConnections: 1) { client in
                try await withThrowingTaskGroup(of: Int.self) { writers in
                    writers.addTask {
                        var rounds = 0
                        while !Task.isCancelled {
                            do {
                                try await client.query("""
                                    UPDATE \(table) SET locale = repeat('x', \(100 + rounds % 50)::int)
                                    WHERE install_id IN (SELECT install_id FROM \(table) ORDER BY random() LIMIT 500)
                                    """, logger: logger)
                            } catch where Task.isCancelled {
                                break
                            }
                            rounds += 1
                        }
                        return rounds
                    }
                    for _ in 0..<20 {
                        let split = try await read(halves)
                        #expect(total(split) == fleet, "each install once while rows move")
                        #expect(split.installs == onePass.installs)
                    }
                    writers.cancelAll()
                    return try await writers.next() ?? 0
                }
            }
            #expect(moved > 0, "rows moved while the halves were read")
        }
    }
}
