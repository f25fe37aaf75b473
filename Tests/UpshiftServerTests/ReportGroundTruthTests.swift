import Foundation
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// Posts a simulated fleet (two months, ~850 installs, ~50,000 events; late, shuffled and duplicated
/// deliveries; a catalog written before, at and after release times; installs placed exactly on the edges of
/// the definitions) to the real server and checks that every report equals its definition
/// (docs/PROJECTIONS.md, "What the reports count.") evaluated directly on the generated events, mid-run and
/// at the end.
@Suite(.serverTimeLimit) struct ReportGroundTruthTests {
    static let fleet = Fleet.generate(seed: 0x5EED_F1EE_7202_6001, iosInstalls: 760, androidInstalls: 90)

    /// Progress lines on standard error with `UPSHIFT_TEST_VERBOSE=1` (how long posting and catch-up take).
    static func progress(_ message: @autoclosure () -> String) {
        guard ProcessInfo.processInfo.environment["UPSHIFT_TEST_VERBOSE"] == "1" else { return }
        FileHandle.standardError.write(Data("[ground truth \(Date())] \(message())\n".utf8))
    }

    @Test func everyReportEqualsTheDefinitionsEvaluatedOnTheEvents() async throws {
        let fleet = Self.fleet
        Self.progress("generated \(fleet.events.count) events, \(fleet.timeline.count) actions")
        checkTheFleetIsRealistic(fleet)
        Self.progress("checked the fleet")
        let harness = try await Harness.make(app: Fleet.appId, now: FleetTime.date(Fleet.start))
        try await harness.run { (server: Server) async throws in
            var etags: [Int: String] = [:]
            var postProblems = 0
            for (time, action) in fleet.timeline {
                harness.clock.set(FleetTime.date(time))
                switch action {
                case .createRelease(let index):
                    let reply = try await server.send(
                        .POST, "/v1/apps/\(Fleet.appId)/releases", key: harness.adminKey,
                        json: releaseBody(fleet.releases[index]))
                    #expect(reply.status == 201, "creating \(fleet.releases[index].version): \(reply.text)")
                    etags[index] = reply.etag
                case .withdrawRelease(let index):
                    let release = fleet.releases[index]
                    let reply = try await server.send(
                        .PATCH, "/v1/apps/\(Fleet.appId)/releases/\(release.platform)/\(release.version.text)",
                        key: harness.adminKey, json: .object(["status": .string("withdrawn")]),
                        headers: [("If-Match", etags[index] ?? "\"1\"")])
                    #expect(reply.status == 200, "withdrawing \(release.version): \(reply.text)")
                case .post(let post):
                    if post.at % FleetTime.day == 0 { Self.progress("posting \(FleetTime.rfc3339(post.at))") }
                    let events = post.events.map { fleet.events[$0].json(installs: fleet.installs) }
                    let body = Data(("{\"events\":[" + events.joined(separator: ",") + "]}").utf8)
                    let reply = try await server.postEvents(body: body, key: harness.ingestKey)
                    let answer = (try? reply.json()) ?? [:]
                    let counts = (answer["accepted"] as? Int, answer["duplicates"] as? Int, answer["rejected"] as? Int)
                    if reply.status != 200 || counts != (post.expectedAccepted, post.expectedDuplicates, 0) {
                        postProblems += 1
                        if postProblems <= 3 {
                            Issue.record(
                                """
                                POST /v1/events at \(FleetTime.rfc3339(time)) with \(post.events.count) events: \
                                expected accepted \(post.expectedAccepted), duplicates \(post.expectedDuplicates), \
                                rejected 0; got HTTP \(reply.status) \(String(reply.text.prefix(600)))
                                """)
                        }
                    }
                case .checkpoint:
                    Self.progress("posted up to \(FleetTime.rfc3339(time)); waiting for the projections")
                    do {
                        try await harness.waitForProjections(timeout: .seconds(60))
                        Self.progress("projections caught up")
                    } catch {
                        // Compare anyway: the differences say which projection is behind, and how.
                        Issue.record("at \(FleetTime.rfc3339(time)): \(error)")
                    }
                    try await compareEveryReport(fleet: fleet, at: time, server: server, readKey: harness.readKey)
                }
            }
            #expect(postProblems == 0, "\(postProblems) posts were not answered as expected")
            try await compareCSV(fleet: fleet, server: server, readKey: harness.readKey)
            try await compareHealthCohorts(fleet: fleet, harness: harness)
            try await compareUnfinishedStarts(fleet: fleet, harness: harness)
            // A set-based rebuild of every projection gives the same tables, so the same reports.
            Self.progress("rebuilding set-based")
            try await harness.expectRebuildEqualsActiveTables()
            if let last = fleet.timeline.last(where: { if case .checkpoint = $0.1 { true } else { false } }) {
                try await compareEveryReport(fleet: fleet, at: last.0, server: server, readKey: harness.readKey)
            }
            Self.progress("done")
        }
    }

    // MARK: Realism: the comparison must not pass on an empty or trivial fleet.

    func checkTheFleetIsRealistic(_ fleet: Fleet) {
        let events = fleet.events
        #expect(events.count > 40_000 && events.count < 200_000, "\(events.count) events")
        let late = events.filter { $0.deliveredAt - $0.occurredAt > FleetTime.day }
        #expect(Set(late.map(\.install)).count > 150, "installs with events more than a day late")
        #expect(late.contains { $0.deliveredAt - $0.occurredAt > 10 * FleetTime.day }, "events ten days late")
        let crossDay = events.filter { FleetTime.dayNumber($0.deliveredAt) != FleetTime.dayNumber($0.occurredAt) }
        #expect(crossDay.count > 1_000, "events delivered on a later day than they happened")
        #expect(fleet.installs.filter(\.isOffline).count > 30)
        #expect(fleet.installs.filter(\.isTester).count > 5)
        #expect(fleet.resends > 10 && fleet.shuffledPosts > 20)
        let byType = Dictionary(grouping: events, by: \.type).mapValues(\.count)
        let types = [
            "launched", "prompt_shown", "prompt_dismissed", "update_started", "updated", "blocked", "whats_new_shown",
        ]
        for type in types {
            #expect(byType[type, default: 0] > 100, "\(type): \(byType[type, default: 0])")
        }
        #expect(events.contains { $0.promptKind == "force" } && events.contains { $0.dismissAction == "skip" })
        // Installs that jump over a release (1.0.0 → 1.2.0).
        let live = fleet.releases.filter { $0.channel == "live" }
        let skips = events.filter { event in
            guard event.type == "updated", let from = event.from else { return false }
            return live.contains { $0.platform == event.platform && $0.version > from && $0.version < event.version }
        }
        #expect(skips.count > 50, "updates that skip a version: \(skips.count)")
        // Real cohorts for the releases made during the simulation (1.3.0 and android 1.2.0 are written to the
        // catalog days after their release time, so the server must seed their cohorts from the log).
        let truth = GroundTruth(fleet: fleet, at: Fleet.end)
        for version in ["1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"] {
            let release = fleet.releases.first { $0.platform == "ios" && $0.version.text == version }!
            let report = truth.release(release)
            #expect(
                report.cohort > 300 && report.updated > 150 && report.updated < report.cohort,
                "\(version): \(report.cohort) / \(report.updated)")
        }
        let android = truth.release(fleet.releases.first { $0.platform == "android" && $0.version.text == "1.2.0" }!)
        #expect(android.cohort > 30 && android.updated > 15, "android 1.2.0: \(android.cohort) / \(android.updated)")
        let impact = truth.minimumImpact(platform: "ios", candidate: "1.5.0", window: 30)
        #expect(impact.unableToUpdate > 20 && impact.below > impact.unableToUpdate)
        let prompts = truth.prompts(platform: "ios", target: nil)
        #expect(prompts.funnels.count >= 6 && prompts.funnels.allSatisfy { $0.converted > 0 || $0.shown < 5 })
        #expect(prompts.funnels.contains { $0.updatedAfterStart > 0 })
    }

    // MARK: Comparing reports

    func compareEveryReport(fleet: Fleet, at now: Int64, server: Server, readKey: String) async throws {
        let truth = GroundTruth(fleet: fleet, at: now)
        let app = "/v1/apps/\(Fleet.appId)/reports"
        let label = "at \(FleetTime.rfc3339(now))"
        func get<T: ReportJSON>(_ path: String, _ expected: T) async throws {
            let reply = try await server.send(.GET, path, key: readKey)
            compare("\(label) GET \(path)", expected: expected, reply: reply)
        }
        let first = FleetTime.dayNumber(Fleet.start) - 1
        let last = FleetTime.dayNumber(now)
        for platform in ["ios", "android"] {
            let from = FleetTime.dayText(first), to = FleetTime.dayText(last)
            try await get(
                "\(app)/adoption?platform=\(platform)&from=\(from)&to=\(to)",
                truth.adoption(platform: platform, from: first, to: last))
        }
        let dayTen = FleetTime.dayNumber(Fleet.start) + 10
        try await get(
            "\(app)/adoption?platform=ios&from=\(FleetTime.dayText(dayTen))&to=\(FleetTime.dayText(dayTen + 10))",
            truth.adoption(platform: "ios", from: dayTen, to: dayTen + 10))

        for release in fleet.releases(at: now) {
            try await get(
                "\(app)/releases/\(release.version.text)?platform=\(release.platform)", truth.release(release))
        }
        // Out in the store, but not yet in the catalog: the server knows no such release.
        for release in fleet.releases where release.createdAt > now && release.releasedAt <= now {
            let path = "\(app)/releases/\(release.version.text)?platform=\(release.platform)"
            let reply = try await server.send(.GET, path, key: readKey)
            #expect(reply.status == 404, "\(label) GET \(path): \(reply.status) \(String(reply.text.prefix(300)))")
        }

        try await get("\(app)/prompts?platform=ios", truth.prompts(platform: "ios", target: nil))
        try await get("\(app)/prompts?platform=android", truth.prompts(platform: "android", target: nil))
        try await get(
            "\(app)/prompts?platform=ios&targetVersion=1.2.0",
            truth.prompts(platform: "ios", target: FleetVersion("1.2.0")))
        // `1.1` is `1.1.0` (docs/ARCHITECTURE.md, "Versions": equality).
        try await get(
            "\(app)/prompts?platform=ios&targetVersion=1.1", truth.prompts(platform: "ios", target: FleetVersion("1.1")))

        for candidate in ["1.3.0", "1.4.1", "1.5.0"] {
            for window in [7, 30] {
                try await get(
                    "\(app)/minimum-impact?platform=ios&version=\(candidate)&window=\(window)",
                    truth.minimumImpact(platform: "ios", candidate: candidate, window: window))
            }
        }
        for window in [7, 30] {
            try await get(
                "\(app)/minimum-impact?platform=android&version=1.2.0&window=\(window)",
                truth.minimumImpact(platform: "android", candidate: "1.2.0", window: window))
        }
    }

    /// The cells the guarded health rule reads (`health_cohorts`): per platform, version, OS major and day,
    /// the installs whose first event on the version fell on that day (with that OS major), and how many of
    /// them reported an abnormal exit of it within 72 hours of that first event.
    func compareHealthCohorts(fleet: Fleet, harness: Harness) async throws {
        let truth = GroundTruth(fleet: fleet, at: Fleet.end)
        var expected: [String: (installs: Int, exited: Int)] = [:]
        for events in truth.byInstall.values {
            for (key, events) in Dictionary(grouping: events, by: { "\($0.platform) \($0.version.normalized)" }) {
                let first = events[0]  // in occurredAt order
                let exit = events.first { $0.type == "abnormal_exit" }
                let os = first.os.map { String($0.parts[0]) } ?? ""
                let cell = "\(key) \(os) \(FleetTime.dayText(ofTime: first.occurredAt))"
                expected[cell, default: (0, 0)].installs += 1
                if let exit, exit.occurredAt < first.occurredAt + 72 * FleetTime.hour { expected[cell, default: (0, 0)].exited += 1 }
            }
        }
        let actual = try await harness.sql { client in
            var generation = 0
            for try await value in try await client.query(
                "SELECT generation FROM projections WHERE name = 'adoption' AND state = 'active'"
            ).decode(Int.self) { generation = value }
            var cells: [String: (installs: Int, exited: Int)] = [:]
            for try await (platform, version, os, day, installs, exited) in try await client.query(
                """
                SELECT platform, version, os_major, day::text, installs, exited
                FROM \(ProjectionTables.name("health_cohorts", generation: generation)) WHERE app_id = 'fleet'
                """
            ).decode((String, String, String, String, Int, Int).self) {
                cells["\(platform) \(version) \(os) \(day)"] = (installs, exited)
            }
            return cells
        }
        func lines(_ cells: [String: (installs: Int, exited: Int)]) -> [String] {
            cells.map { "\($0.key): \($0.value.installs) \($0.value.exited)" }.sorted()
        }
        #expect(expected.values.contains { $0.exited > 0 } && expected.count > 100, "the fleet has too few cohort cells with exits")
        let (want, got) = (lines(expected), lines(actual))
        #expect(want == got, "health_cohorts: missing \(Array(Set(want).subtracting(got).sorted().prefix(5))), unexpected \(Array(Set(got).subtracting(want).sorted().prefix(5)))")
    }

    /// What the halt-on-prompts rule reads for `unfinishedRate`, judged at several moments of the period: per
    /// platform and target, the installs whose first `update_started` for it was recorded (first delivered)
    /// 24 hours or more before, and of those the installs with no `updated` to a version ≥ the target
    /// recorded within those 24 hours. Late deliveries make both kinds.
    func compareUnfinishedStarts(fleet: Fleet, harness: Harness) async throws {
        struct Key: Hashable {
            var platform: String
            var target: FleetVersion
        }
        var firstStart: [Key: [Int: Int64]] = [:]
        var updates: [String: [Int: [(version: FleetVersion, recorded: Int64)]]] = [:]
        for event in fleet.delivered(by: Fleet.end) {
            if event.type == "update_started", let target = event.target {
                let key = Key(platform: event.platform, target: target)
                firstStart[key, default: [:]][event.install] = min(firstStart[key]?[event.install] ?? .max, event.deliveredAt)
            } else if event.type == "updated" {
                updates[event.platform, default: [:]][event.install, default: []].append((event.version, event.deliveredAt))
            }
        }
        // Before the last delivery: the projection has applied events recorded after each moment.
        let moments = [34, 45, 55, 60].map { Fleet.start + Int64($0) * FleetTime.day }
        var kinds = (finished: 0, unfinished: 0)
        for moment in moments {
            for (key, starts) in firstStart.sorted(by: { ($0.key.platform, $0.key.target) < ($1.key.platform, $1.key.target) }) {
                var expected = (started: 0, unfinished: 0)
                for (install, start) in starts where start + 24 * FleetTime.hour <= moment {
                    expected.started += 1
                    let finished = (updates[key.platform]?[install] ?? []).contains {
                        $0.version >= key.target && $0.recorded >= start && $0.recorded <= start + 24 * FleetTime.hour
                    }
                    if !finished { expected.unfinished += 1 }
                }
                kinds.finished += expected.started - expected.unfinished
                kinds.unfinished += expected.unfinished
                let read = try await harness.sql { client in
                    try await ReportStore(client: client, logger: TestEnvironment.logger).unfinishedStarts(
                        app: Fleet.appId, platform: Platform(validating: key.platform)!, target: Version(key.target.text)!,
                        now: FleetTime.date(moment)
                    ).value
                }
                #expect(
                    read == expected,
                    "unfinished starts of \(key.platform) \(key.target) at \(FleetTime.rfc3339(moment)): \(read), expected \(expected)")
            }
        }
        #expect(kinds.finished > 0 && kinds.unfinished > 0, "the fleet must finish some starts and leave others unfinished: \(kinds)")
    }

    /// Adoption as CSV: `day,active_installs,version,installs`, one line per (day, version), `day,0,,0` for
    /// an empty day, CRLF line ends.
    func compareCSV(fleet: Fleet, server: Server, readKey: String) async throws {
        let truth = GroundTruth(fleet: fleet, at: Fleet.end)
        let first = FleetTime.dayNumber(Fleet.start) - 1
        let last = FleetTime.dayNumber(Fleet.end)
        for platform in ["ios", "android"] {
            let report = truth.adoption(platform: platform, from: first, to: last)
            var expected = "day,active_installs,version,installs\r\n"
            for day in report.days {
                if day.versions.isEmpty { expected += "\(day.day),0,,0\r\n" }
                for cell in day.versions {
                    expected += "\(day.day),\(day.activeInstalls),\(cell.version),\(cell.installs)\r\n"
                }
            }
            let path =
                "/v1/apps/\(Fleet.appId)/reports/adoption?platform=\(platform)&from=\(FleetTime.dayText(first))"
                + "&to=\(FleetTime.dayText(last))"
            let reply = try await server.send(.GET, path, key: readKey, headers: [("Accept", "text/csv")])
            #expect(reply.status == 200)
            #expect(reply.headers["Content-Type"].first?.hasPrefix("text/csv") == true, "\(reply.headers)")
            let got = reply.text
            if got != expected {
                let gotLines = got.components(separatedBy: "\r\n"), expectedLines = expected.components(separatedBy: "\r\n")
                let index =
                    (0..<min(gotLines.count, expectedLines.count)).first { gotLines[$0] != expectedLines[$0] }
                    ?? min(gotLines.count, expectedLines.count)
                Issue.record(
                    """
                    GET \(path) (text/csv) differs at line \(index + 1): expected \
                    \(index < expectedLines.count ? expectedLines[index].debugDescription : "end"), got \
                    \(index < gotLines.count ? gotLines[index].debugDescription : "end") \
                    (\(expectedLines.count) vs \(gotLines.count) lines; CRLF: \(got.contains("\r\n")))
                    """)
            }
        }
    }

    func compare<T: ReportJSON>(_ label: String, expected: T, reply: Server.Reply) {
        guard reply.status == 200 else {
            Issue.record("\(label): HTTP \(reply.status) \(String(reply.text.prefix(400)))")
            return
        }
        let actual: T
        do {
            actual = try JSONDecoder().decode(T.self, from: reply.body)
        } catch {
            Issue.record("\(label): undecodable (\(error)): \(String(reply.text.prefix(400)))")
            return
        }
        if let json = try? reply.value() {
            let missing = T.missingNulls(json)
            if !missing.isEmpty { Issue.record("\(label): no explicit null for \(missing.joined(separator: ", "))") }
        }
        guard actual != expected else { return }
        let differences = JSONDifference.between(expected, actual)
        let shown = differences.prefix(15).joined(separator: "\n")
        Issue.record("\(label) differs from the definition in \(differences.count) places:\n\(shown)")
    }

    func releaseBody(_ release: FleetRelease) -> JSONValue {
        var body: [String: JSONValue] = [
            "platform": .string(release.platform), "version": .string(release.version.text),
            "releasedAt": .string(FleetTime.rfc3339(release.releasedAt)), "channel": .string(release.channel),
            "notes": .object(["en": .array([.string("Release \(release.version.text)")])]),
        ]
        if let minimum = release.minimumOS { body["minimumOSVersion"] = .string(minimum.text) }
        if let maximum = release.maximumOS { body["maximumOSVersion"] = .string(maximum.text) }
        return .object(body)
    }
}

// MARK: - The reports as the API spells them

protocol ReportJSON: Codable, Equatable {
    /// Optional fields the answer must carry as an explicit `null` rather than leave out.
    static func missingNulls(_ json: JSONValue) -> [String]
}

extension ReportJSON {
    static func missingNulls(_ json: JSONValue) -> [String] { [] }
}

struct AdoptionJSON: ReportJSON {
    struct Cell: Codable, Equatable {
        var version: String
        var installs: Int
    }

    struct Day: Codable, Equatable {
        var day: String
        var activeInstalls: Int
        var versions: [Cell]
    }

    var app: AppID
    var platform: String
    var from: String
    var to: String
    var days: [Day]
}

struct ReleaseJSON: ReportJSON {
    static func missingNulls(_ json: JSONValue) -> [String] {
        ["medianSeconds", "p90Seconds"].filter { json[$0] == nil }
            + ["day1", "day7", "day30"].filter { json["updatedShare"]?[$0] == nil }.map { "updatedShare." + $0 }
            + ["exitFreeShare", "previousVersion"].filter { json["health"]?[$0] == nil }.map { "health." + $0 }
    }

    struct Health: Codable, Equatable {
        struct Day: Codable, Equatable {
            var day: Int
            var date: String
            var installs: Int
            var exited: Int
            var exitFreeShare: Double?
            var previousExitFreeShare: Double?
        }

        struct Age: Codable, Equatable {
            var day: Int
            var exitFreeShare: Double?
            var previousExitFreeShare: Double?
        }

        var note: String
        var installDays: Int
        var exitedInstallDays: Int
        var exitFreeShare: Double?
        var days: [Day]
        var previousVersion: String?
        var baseline: String
        var atAge: [Age]
    }

    struct Shares: Codable, Equatable {
        var day1: Double?
        var day7: Double?
        var day30: Double?
    }

    struct Point: Codable, Equatable {
        var day: Int
        var updated: Int
        var share: Double
    }

    var app: AppID
    var platform: String
    var version: String
    var releasedAt: String
    var cohort: Int
    var updated: Int
    var updatedShare: Shares
    var medianSeconds: Double?
    var p90Seconds: Double?
    var curve: [Point]
    var health: Health
}

struct PromptsJSON: ReportJSON {
    struct Funnel: Codable, Equatable {
        var targetVersion: String
        var promptKind: String
        var shown: Int
        var dismissedLater: Int
        var dismissedSkip: Int
        var updateStarted: Int
        var blocked: Int
        var converted: Int
        var updatedAfterStart: Int
    }

    var app: AppID
    var platform: String
    var funnels: [Funnel]
}

struct ImpactJSON: ReportJSON {
    static func missingNulls(_ json: JSONValue) -> [String] {
        guard case .array(let rows)? = json["byOS"] else { return [] }
        return rows.contains { $0["value"] == nil } ? ["byOS[].value"] : []
    }

    struct Row: Codable, Equatable {
        var value: String?
        var activeInstalls = 0
        var below = 0
        var unableToUpdate = 0
    }

    var app: AppID
    var platform: String
    var candidateMinimum: String
    var windowDays: Int
    var activeInstalls: Int
    var below: Int
    var unableToUpdate: Int
    var byVersion: [Row]
    var byOS: [Row]
}

// MARK: - The definitions of the reports (docs/PROJECTIONS.md, "What the reports count."), evaluated on the events

/// The reports the server should give at `now`, after every post up to `now`, from the events the fleet
/// generated — by the plain definitions, with no incremental state, so that a projection that folds
/// late, shuffled or duplicated events differently cannot agree by accident.
struct GroundTruth {
    let now: Int64
    /// Delivered events of each install, in `occurredAt` order (no install has two at the same time).
    let byInstall: [Int: [FleetEvent]]
    let catalog: [FleetRelease]
    /// Per platform, each install's events of that platform.
    private let byPlatform: [String: [[FleetEvent]]]

    init(fleet: Fleet, at now: Int64) {
        self.now = now
        let byInstall = Dictionary(grouping: fleet.delivered(by: now), by: \.install)
            .mapValues { $0.sorted { $0.occurredAt < $1.occurredAt } }
        self.byInstall = byInstall
        catalog = fleet.releases(at: now)
        var byPlatform: [String: [[FleetEvent]]] = [:]
        for install in byInstall.keys.sorted() {
            for (platform, events) in Dictionary(grouping: byInstall[install]!, by: \.platform) {
                byPlatform[platform, default: []].append(events)
            }
        }
        self.byPlatform = byPlatform
    }

    func installs(on platform: String) -> [[FleetEvent]] { byPlatform[platform] ?? [] }

    /// For day d and version v: installs whose last event on d carried v.
    func adoption(platform: String, from: Int64, to: Int64) -> AdoptionJSON {
        var cells: [Int64: [FleetVersion: Int]] = [:]
        for events in installs(on: platform) {
            var lastOfDay: [Int64: FleetVersion] = [:]
            for event in events { lastOfDay[FleetTime.dayNumber(event.occurredAt)] = event.version }
            for (day, version) in lastOfDay { cells[day, default: [:]][version, default: 0] += 1 }
        }
        let days = (from...to).map { day in
            let versions = (cells[day] ?? [:]).sorted { $0.key < $1.key }
            return AdoptionJSON.Day(
                day: FleetTime.dayText(day), activeInstalls: versions.reduce(0) { $0 + $1.value },
                versions: versions.map { AdoptionJSON.Cell(version: $0.key.normalized, installs: $0.value) })
        }
        return AdoptionJSON(
            app: Fleet.appId, platform: platform, from: FleetTime.dayText(from), to: FleetTime.dayText(to), days: days)
    }

    /// Time-to-update: the cohort seen in [R − 7 days, R) whose last version before R was below v; T is the
    /// first time at or after R on a version ≥ v, minus R.
    func release(_ release: FleetRelease) -> ReleaseJSON {
        let r = release.releasedAt
        var cohort = 0
        var times: [Int64] = []
        for events in installs(on: release.platform) {
            guard events.contains(where: { $0.occurredAt >= r - 7 * FleetTime.day && $0.occurredAt < r }),
                let lastBefore = events.last(where: { $0.occurredAt < r }), lastBefore.version < release.version
            else { continue }
            cohort += 1
            if let first = events.first(where: { $0.occurredAt >= r && $0.version >= release.version }) {
                times.append(first.occurredAt - r)
            }
        }
        times.sort()
        func within(days: Int64) -> Int { times.filter { $0 <= days * FleetTime.day }.count }
        func share(_ count: Int) -> Double? { cohort == 0 ? nil : Double(count) / Double(cohort) }
        func quantile(_ hundredths: Int) -> Double? {
            guard cohort > 0 else { return nil }
            let k = max(1, (hundredths * cohort + 99) / 100)
            return times.count >= k ? Double(times[k - 1]) / 1000 : nil
        }
        var curve: [ReleaseJSON.Point] = []
        if now >= r, cohort > 0 {
            for day in 0...min((now - r) / FleetTime.day, 365) {
                let updated = within(days: day)
                curve.append(ReleaseJSON.Point(day: Int(day), updated: updated, share: Double(updated) / Double(cohort)))
            }
        }
        return ReleaseJSON(
            app: Fleet.appId, platform: release.platform, version: release.version.normalized,
            releasedAt: FleetTime.rfc3339(r), cohort: cohort, updated: times.count,
            updatedShare: .init(day1: share(within(days: 1)), day7: share(within(days: 7)), day30: share(within(days: 30))),
            medianSeconds: quantile(50), p90Seconds: quantile(90), curve: curve, health: health(release))
    }

    /// For day d: the installs whose last event on d carried the release's version, and those of them with
    /// an `abnormal_exit` of it on d; beside the newest live release of its channel below it, at the same
    /// number of days after its own release day, when that release has an abnormal exit on record.
    func health(_ release: FleetRelease) -> ReleaseJSON.Health {
        func days(of version: FleetVersion) -> [Int64: (installs: Int, exited: Int)] {
            var cells: [Int64: (installs: Int, exited: Int)] = [:]
            for events in installs(on: release.platform) {
                var last: [Int64: FleetVersion] = [:]
                var exits: [Int64: Set<FleetVersion>] = [:]
                for event in events {
                    let day = FleetTime.dayNumber(event.occurredAt)
                    last[day] = event.version
                    if event.type == "abnormal_exit" { exits[day, default: []].insert(event.version) }
                }
                for (day, last) in last where last == version {
                    cells[day, default: (0, 0)].installs += 1
                    if exits[day]?.contains(version) == true { cells[day, default: (0, 0)].exited += 1 }
                }
            }
            return cells
        }
        func share(_ cell: (installs: Int, exited: Int)?) -> Double? {
            guard let cell, cell.installs > 0 else { return nil }
            return Double(cell.installs - cell.exited) / Double(cell.installs)
        }
        let own = days(of: release.version)
        let previous = catalog.filter {
            $0.platform == release.platform && $0.channel == release.channel && !$0.isWithdrawn(at: now)
                && $0.version < release.version
        }.max { $0.version < $1.version }
        let baseline = previous.flatMap { previous in
            let cells = days(of: previous.version)
            return cells.values.contains { $0.exited > 0 } ? (previous, cells) : nil
        }
        func previousShare(_ age: Int64) -> Double? {
            baseline.flatMap { share($0.1[FleetTime.dayNumber($0.0.releasedAt) + age]) }
        }
        let first = FleetTime.dayNumber(release.releasedAt)
        var list: [ReleaseJSON.Health.Day] = []
        if now >= release.releasedAt {
            for age in 0...min(FleetTime.dayNumber(now) - first, 365) {
                let cell = own[first + age] ?? (0, 0)
                list.append(.init(
                    day: Int(age), date: FleetTime.dayText(first + age), installs: cell.installs, exited: cell.exited,
                    exitFreeShare: share(cell), previousExitFreeShare: previousShare(age)))
            }
        }
        let installDays = own.values.reduce(0) { $0 + $1.installs }, exited = own.values.reduce(0) { $0 + $1.exited }
        return ReleaseJSON.Health(
            note: "counts only installs whose SDK reports abnormal exits", installDays: installDays, exitedInstallDays: exited,
            exitFreeShare: share((installDays, exited)), days: list, previousVersion: previous?.version.normalized,
            baseline: baseline == nil ? "no baseline" : "compared",
            atAge: [1, 3, 7].map { .init(day: $0, exitFreeShare: share(own[first + Int64($0)]), previousExitFreeShare: previousShare(Int64($0))) })
    }

    /// Distinct installs per step, per target and kind; converted = seen on a version ≥ target within
    /// [first shown, first shown + 7 days]; updated after starting = the same from the first `update_started`.
    func prompts(platform: String, target filter: FleetVersion?) -> PromptsJSON {
        struct Key: Hashable {
            var target: FleetVersion
            var kind: String
        }
        var firstShown: [Key: [Int: Int64]] = [:]
        var later: [Key: Set<Int>] = [:], skip: [Key: Set<Int>] = [:], started: [Key: Set<Int>] = [:]
        var blocked: [Key: Set<Int>] = [:]
        var firstStarted: [Key: [Int: Int64]] = [:]
        for events in installs(on: platform) {
            for event in events {
                guard let target = event.target else { continue }
                let key = Key(target: target, kind: event.type == "blocked" ? "force" : event.promptKind!)
                switch event.type {
                case "prompt_shown":
                    firstShown[key, default: [:]][event.install] = min(
                        firstShown[key]?[event.install] ?? .max, event.occurredAt)
                case "prompt_dismissed":
                    if event.dismissAction == "later" { later[key, default: []].insert(event.install) }
                    if event.dismissAction == "skip" { skip[key, default: []].insert(event.install) }
                case "update_started":
                    started[key, default: []].insert(event.install)
                    firstStarted[key, default: [:]][event.install] = min(
                        firstStarted[key]?[event.install] ?? .max, event.occurredAt)
                case "blocked": blocked[key, default: []].insert(event.install)
                default: break
                }
            }
        }
        let keys = Set(firstShown.keys).union(later.keys).union(skip.keys).union(started.keys).union(blocked.keys)
            .filter { key in filter.map { key.target == $0 } ?? true }
            .sorted { ($0.target, $0.kind) < ($1.target, $1.kind) }
        let funnels = keys.map { key in
            func reached(within starts: [Int: Int64]) -> Int {
                starts.filter { install, first in
                    byInstall[install]!.contains {
                        $0.version >= key.target && $0.occurredAt >= first && $0.occurredAt <= first + 7 * FleetTime.day
                    }
                }.count
            }
            let shown = firstShown[key] ?? [:]
            return PromptsJSON.Funnel(
                targetVersion: key.target.normalized, promptKind: key.kind, shown: shown.count,
                dismissedLater: later[key]?.count ?? 0, dismissedSkip: skip[key]?.count ?? 0,
                updateStarted: started[key]?.count ?? 0, blocked: blocked[key]?.count ?? 0, converted: reached(within: shown),
                updatedAfterStart: reached(within: firstStarted[key] ?? [:]))
        }
        return PromptsJSON(app: Fleet.appId, platform: platform, funnels: funnels)
    }

    /// Installs last seen within the window, by the version and OS of their latest event; below the candidate,
    /// and unable to install any live, released, live-channel release ≥ the candidate on their OS.
    func minimumImpact(platform: String, candidate text: String, window: Int) -> ImpactJSON {
        let candidate = FleetVersion(text)
        let releases = catalog.filter {
            $0.platform == platform && $0.version >= candidate && !$0.isWithdrawn(at: now) && $0.channel == "live"
                && $0.releasedAt <= now
        }
        typealias Row = ImpactJSON.Row
        var total = Row(value: nil)
        var byVersion: [FleetVersion: Row] = [:]
        var byOS: [FleetVersion?: Row] = [:]
        for events in installs(on: platform) {
            let latest = events.last!
            guard latest.occurredAt >= now - Int64(window) * FleetTime.day else { continue }
            let below = latest.version < candidate
            let unable = below && !releases.contains { $0.admits(os: latest.os) }
            func add(_ row: inout Row) {
                row.activeInstalls += 1
                if below { row.below += 1 }
                if unable { row.unableToUpdate += 1 }
            }
            add(&total)
            add(&byVersion[latest.version, default: Row(value: latest.version.normalized)])
            add(&byOS[latest.os, default: Row(value: latest.os?.text)])
        }
        let osOrder = byOS.keys.sorted { a, b in
            switch (a, b) {
            case (let a?, let b?): a < b
            case (.some, nil): true
            default: false
            }
        }
        return ImpactJSON(
            app: Fleet.appId, platform: platform, candidateMinimum: text, windowDays: window,
            activeInstalls: total.activeInstalls, below: total.below, unableToUpdate: total.unableToUpdate,
            byVersion: byVersion.keys.sorted().map { byVersion[$0]! }, byOS: osOrder.map { byOS[$0]! })
    }
}

// MARK: - Readable differences

/// `path: expected X, got Y` lines between two JSON documents; array elements are labelled with their
/// `day` / `version` / `value` / `targetVersion` so that a line says which row differs.
enum JSONDifference {
    static func between<T: Encodable>(_ expected: T, _ actual: T) -> [String] {
        guard let a = try? JSONValue.parse(JSONEncoder().encode(expected)),
            let b = try? JSONValue.parse(JSONEncoder().encode(actual))
        else { return ["(not encodable)"] }
        var lines: [String] = []
        walk(a, b, path: "", into: &lines)
        return lines
    }

    private static func walk(_ a: JSONValue, _ b: JSONValue, path: String, into lines: inout [String]) {
        switch (a, b) {
        case (.object(let x), .object(let y)):
            for key in Set(x.keys).union(y.keys).sorted() {
                walk(x[key] ?? .null, y[key] ?? .null, path: path + "." + key, into: &lines)
            }
        case (.array(let x), .array(let y)):
            if x.count != y.count { lines.append("\(path): expected \(x.count) elements, got \(y.count)") }
            for index in 0..<min(x.count, y.count) {
                var label = "\(index)"
                for name in ["day", "targetVersion", "version", "value"] {
                    if let tag = x[index][name], case .string(let text) = tag {
                        label += " \(text)"
                        break
                    }
                }
                if x[index]["promptKind"] != nil, let kind = x[index]["promptKind"]?.stringValue { label += " \(kind)" }
                walk(x[index], y[index], path: path + "[\(label)]", into: &lines)
            }
        default:
            if a != b { lines.append("\(path.isEmpty ? "." : path): expected \(a), got \(b)") }
        }
    }
}
