import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftStore

/// `upshift simulate --scenario health`: the rules acting on a fleet's own data, through the server. The
/// fleet (four OS majors, each install opening the app as its ``InstallHabits`` say, its session ending
/// abnormally on 2 % of those days) runs 0.9 and takes three releases, each on the App Store's schedule: 1.0
/// and 1.1 healthy, 1.2 twice as prone to abnormal exits on one OS major. Three rules are live: the guarded
/// health halt, the advance rule, and a raise of the minimum to 1.1. An install asks the check only on a
/// day its habit would update it (or while it is below the minimum), and updates to what the check offers;
/// its events are posted over HTTP in batches, as the SDK would flush them.
///
/// The server evaluates the rules once a day, at 00:00 UTC of the application's clock, after every event of the
/// day before has been stored and projected. After each evaluation the scenario's ground truth, computed from
/// the fleet's own facts (never from the server's read models), says which releases the health rule's
/// definition halts by then and whether the raise's conditions have held: the catalog must agree at every
/// evaluation, so an action taken a day early or late is a difference.
public struct HealthScenario {
    public struct Options: Sendable {
        public var installs = 20_000
        public var seed: UInt64 = 1
        /// How many times the healthy rate of abnormal exits the bad release has on ``HealthFleetModel/badOSMajor``.
        public var badFactor = 2.0
        public var appId: AppID
        /// The end of the simulated period: its last day ends here (the run stops earlier once every
        /// rule has acted).
        public var end: Date
        public var progress: Bool

        public init(appId: AppID, end: Date, progress: Bool) {
            self.appId = appId
            self.end = end
            self.progress = progress
        }
    }

    public struct Result: Sendable {
        /// Rows the server stored for the fleet: events and answered checks.
        public var stored: Int
        /// Simulated days until every rule had acted.
        public var days: Int
        /// What happened, one line each.
        public var summary: [String]
        /// Where the server's catalog differs from the ground truth, one line each.
        public var differences: [String]
        /// Days from the bad release's UTC day to the evaluation that halted it, and the share of the
        /// previous day's active installs that ran it.
        public var badHalt: (age: Int, share: Double)?
        /// When the raise-minimum rule raised the minimum to 1.1.
        public var raisedAt: Date?
        /// The healthy release at the end: its rollout percent, and whether it was halted.
        public var healthy: (percent: Double, halted: Bool)
    }

    static let versions = ["0.9", "1.0", "1.1", "1.2"].map { Version($0)! }
    /// The day of the period each version is released on, at 10:00.
    static let releaseDays = [-60, 0, 14, 28]
    static let healthy = 2, bad = 3
    static let osMajors = HealthFleetModel.osMajors
    static let exitRate = 0.02
    /// The hours of the day the fleet's launches are gathered in; each slot's launches fall in its first ten minutes.
    static let slotHours = [9, 13, 17, 21]
    /// The raise: to 1.1 once half the installs active in the last 7 days run it or later, fewer than half
    /// the fleet would be forced, and 1.1 has been out to everyone for those 7 days.
    var raise: RaiseMinimumRule {
        RaiseMinimumRule(version: Self.versions[Self.healthy], share: 0.5, windowDays: 7, maximumForced: max(1, options.installs / 2))
    }
    /// The period: up to the bad release's 35 watched days.
    static let days = releaseDays[bad] + HealthRule.monitoredDays + HealthRule.settledDays

    let options: Options
    let simulation: FleetSimulation

    public init(options: Options, configuration base: AppConfiguration, logger: Logger) {
        self.options = options
        var configuration = base
        // Once a day, at 00:00 UTC, which the scenario's clock passes after each day's events: none falls between its slots.
        configuration.projections.rulesInterval = 86_400
        // Days of the period are UTC days, ending at the midnight before `end`.
        let end = Date(timeIntervalSince1970: (options.end.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400)
        var fleet = FleetSimulation.Options(
            installs: options.installs, days: Self.days, seed: options.seed, appId: options.appId, end: end,
            progress: options.progress)
        fleet.appName = "Release health"
        simulation = FleetSimulation(options: fleet, configuration: configuration, logger: logger)
    }

    public func run() async throws -> Result {
        try await simulation.serving { keys in
            var driver = Driver(scenario: self, keys: keys)
            return try await driver.run()
        }
    }

    struct Install {
        let id: UUID
        let os: String
        let osVersion: String
        let habits: InstallHabits
        var version = 0
    }

    /// What the fleet did, as the rules' definitions read it: per install, its latest fact and, per version,
    /// its first fact on it and its first abnormal exit of it.
    struct Truth {
        var lastAt: [Date]
        var lastVersion: [Int]
        var first: [[Date?]]
        var exit: [[Date?]]
        var exitsOnRecord = [Bool](repeating: false, count: HealthScenario.versions.count)

        init(installs: Int) {
            lastAt = Array(repeating: .distantPast, count: installs)
            lastVersion = Array(repeating: 0, count: installs)
            first = Array(repeating: Array(repeating: nil, count: HealthScenario.versions.count), count: installs)
            exit = first
        }

        mutating func record(_ install: Int, _ version: Int, at: Date, exited: Bool = false) {
            if at >= lastAt[install] { (lastAt[install], lastVersion[install]) = (at, version) }
            if first[install][version].map({ at < $0 }) ?? true { first[install][version] = at }
            if exited {
                if exit[install][version].map({ at < $0 }) ?? true { exit[install][version] = at }
                exitsOnRecord[version] = true
            }
        }

        /// `version`'s health cohorts: per OS major and UTC day of each install's first fact on it, the
        /// installs, and those with an abnormal exit of it within 72 hours of that fact.
        func cohorts(_ version: Int, releasedAt: Date, fleet: [Install]) -> ReleaseCohorts {
            let members = fleet.indices.compactMap { index -> HealthCohortCell.Member? in
                guard let firstAt = first[index][version] else { return nil }
                let exited = exit[index][version].map { $0 < firstAt.addingTimeInterval(HealthCohort.exitWindow) } ?? false
                return (fleet[index].os, UTCDay(firstAt), exited)
            }
            return ReleaseCohorts(
                version: HealthScenario.versions[version].normalized, releasedAt: releasedAt,
                cells: HealthCohortCell.counting(members), exitsOnRecord: exitsOnRecord[version])
        }

        /// The raise's figures at `now`: the installs whose latest fact falls in the window, and those of them
        /// below the rule's version (every OS of the fleet runs it, so each of those would be forced).
        func raiseFigures(_ raise: RaiseMinimumRule, now: Date) -> (active: Int, below: Int) {
            let since = now.addingTimeInterval(-Double(raise.windowDays) * 86_400)
            var active = 0, below = 0
            for index in lastAt.indices where lastAt[index] >= since {
                active += 1
                if HealthScenario.versions[lastVersion[index]] < raise.version { below += 1 }
            }
            return (active, below)
        }
    }

    /// One run against the server.
    struct Driver {
        let scenario: HealthScenario
        let keys: FleetSimulation.Keys
        let http: HTTP
        var fleet: [Install]
        var truth: Truth
        var random: SplitMix64
        var stored = 0
        var posted = 0
        var summary: [String] = []
        var differences: [String] = []

        var app: AppID { scenario.options.appId }
        var simulation: FleetSimulation { scenario.simulation }
        var start: Date { simulation.start }

        init(scenario: HealthScenario, keys: FleetSimulation.Keys) {
            self.scenario = scenario
            self.keys = keys
            http = HTTP(baseURL: scenario.simulation.baseURL)
            // Install ids from the seed too: the rollout's buckets, and so the whole run, follow from it.
            var random = SplitMix64(seed: scenario.options.seed)
            fleet = (0..<scenario.options.installs).map { index in
                let os = HealthScenario.osMajors[index % HealthScenario.osMajors.count]
                let bytes = (random.next(), random.next())
                let id = withUnsafeBytes(of: bytes) { UUID(uuid: $0.load(as: uuid_t.self)) }
                return Install(id: id, os: os, osVersion: "\(os).\(random.int(0...5))", habits: InstallHabits(random: &random))
            }
            self.random = random
            truth = Truth(installs: scenario.options.installs)
        }

        func releasedAt(_ version: Int) -> Date {
            start.addingTimeInterval(Double(HealthScenario.releaseDays[version]) * 86_400 + 10 * 3_600)
        }

        func releaseBody(_ version: Int) -> JSONValue {
            var fields: [String: JSONValue] = [
                "platform": .string("ios"), "version": .string(HealthScenario.versions[version].text),
                "releasedAt": .string(Timestamp.format(releasedAt(version))), "minimumOSVersion": .string("14.0"),
                "notes": .object(["en": .array([.string("Version \(HealthScenario.versions[version].text)")])]),
            ]
            if version > 0 { fields["rolloutSchedule"] = .string(RolloutSchedule.Kind.appStore.rawValue) }
            return .object(fields)
        }

        mutating func run() async throws -> Result {
            try await http.waitUntilReady()
            let clock = simulation.clock
            clock.set(releasedAt(0))
            try await http.admin(.POST, "/v1/apps/\(app)/releases", key: keys.admin, body: releaseBody(0))
            clock.set(start)
            try await http.admin(.PUT, "/v1/apps/\(app)/policies/ios", key: keys.admin, body: .object(["enabled": .bool(true)]), ifMatch: 0)
            let raise = scenario.raise
            let rules: [(String, JSONValue)] = [
                ("health-guard", .object(["kind": .string("halt_on_health"), "mode": .string("guarded")])),
                ("advance", .object(["kind": .string("advance")])),
                ("raise-1-1", .object([
                    "kind": .string("raise_minimum"), "version": .string(raise.version.text),
                    "share": .number(JSONNumber(raise.share)), "windowDays": .number(JSONNumber(raise.windowDays)),
                    "maximumForced": .number(JSONNumber(raise.maximumForced)),
                ])),
            ]
            for (id, body) in rules {
                var fields = body.objectValue ?? [:]
                fields["state"] = .string("live")
                try await http.admin(.PUT, "/v1/apps/\(app)/rules/ios/\(id)", key: keys.admin, body: .object(fields), ifMatch: 0)
            }

            var watches = (1..<HealthScenario.versions.count).map { version in
                FleetSimulation.ScheduleWatch(
                    release: PlannedRelease(
                        version: HealthScenario.versions[version].text, at: releasedAt(version), day: HealthScenario.releaseDays[version],
                        minimumOSVersion: "14.0", notes: [], phased: true),
                    app: app, key: keys.admin, database: simulation.configuration.database,
                    operatorToken: simulation.configuration.operatorToken, logger: simulation.logger)
            }
            var published = 1
            var minimum = 0  // the policy's minimum, as an index of `versions` (0: none)
            var halted = Set<Int>()
            var expectedHalted = Set<Int>()
            var expectedRaise: Date?
            var steadySince: Date?  // when the catalog had 1.1 at 100 %, as the schedule says it does
            var badShare: [Double] = []
            var badHalt: (age: Int, share: Double)?
            let progress = ProgressLine(enabled: scenario.options.progress, days: HealthScenario.days)
            var day = 0
            while day < HealthScenario.days {
                let dayStart = start.addingTimeInterval(Double(day) * 86_400)
                var slots = [[(install: Int, offset: Int)]](repeating: [], count: HealthScenario.slotHours.count)
                for index in fleet.indices where random.chance(fleet[index].habits.launchProbability) {
                    slots[random.int(0...HealthScenario.slotHours.count - 1)].append((index, random.int(0...599)))
                }
                var dayVersion: [Int: Int] = [:]
                for (slot, hour) in HealthScenario.slotHours.enumerated() {
                    let slotStart = dayStart.addingTimeInterval(Double(hour) * 3_600)
                    let now = slotStart.addingTimeInterval(600)
                    while published < HealthScenario.versions.count, releasedAt(published) <= now {
                        clock.set(releasedAt(published))
                        try await http.admin(.POST, "/v1/apps/\(app)/releases", key: keys.admin, body: releaseBody(published))
                        published += 1
                    }
                    clock.set(now)
                    for version in 1..<published where !halted.contains(version) {
                        try await watches[version - 1].awaitStep(at: now, http: http)
                        if version == HealthScenario.healthy, steadySince == nil, watches[version - 1].confirmed >= 100 {
                            steadySince = now
                        }
                    }
                    let offered = (0..<published).last { !halted.contains($0) } ?? 0
                    var events: [JSONValue] = []
                    var asking: [Int] = []
                    for (index, offset) in slots[slot] {
                        let install = fleet[index]
                        let launchedAt = slotStart.addingTimeInterval(Double(offset))
                        events.append(event("launched", install, install.version, at: launchedAt))
                        truth.record(index, install.version, at: launchedAt)
                        if install.version < minimum || (install.version < offered && random.chance(install.habits.updateHazard)) {
                            asking.append(index)
                        }
                    }
                    for (index, answer) in try await check(asking) {
                        truth.record(index, fleet[index].version, at: now)  // the check's `checked` event
                        stored += 1
                        guard let answer, answer > fleet[index].version else { continue }
                        let updatedAt = now.addingTimeInterval(60)
                        events.append(event("updated", fleet[index], answer, at: updatedAt, from: fleet[index].version))
                        truth.record(index, answer, at: updatedAt)
                        fleet[index].version = answer
                    }
                    for (index, _) in slots[slot] {
                        let install = fleet[index]
                        dayVersion[index] = install.version
                        let bad = install.version == HealthScenario.bad && install.os == HealthFleetModel.badOSMajor
                        let rate = HealthScenario.exitRate * (bad ? scenario.options.badFactor : 1)
                        guard random.chance(rate) else { continue }
                        let exitAt = now.addingTimeInterval(600)
                        events.append(event("abnormal_exit", install, install.version, at: exitAt))
                        truth.record(index, install.version, at: exitAt, exited: true)
                    }
                    try await post(events)
                }
                if day >= HealthScenario.releaseDays[HealthScenario.bad] {
                    badShare.append(Double(dayVersion.values.filter { $0 == HealthScenario.bad }.count) / Double(max(1, dayVersion.count)))
                }
                progress.update(day: day + 1, events: posted)

                // The day's evaluation: everything of the day stored and projected, then 00:00 of the next.
                try await simulation.waitForStoredEvents(expected: stored, http: http)
                let evaluation = dayStart.addingTimeInterval(86_400)
                let before = try await http.metric("upshift_rule_evaluations_total", token: simulation.configuration.operatorToken) ?? 0
                clock.set(evaluation)
                try await awaitEvaluation(after: before)

                // What the rules' definitions say at this evaluation, from the fleet's facts.
                for version in 1..<published where !expectedHalted.contains(version) {
                    guard evaluation.timeIntervalSince(releasedAt(version)) < Double(HealthRule.monitoredDays + HealthRule.settledDays) * 86_400
                    else { continue }
                    let decision = HealthRule.evaluate(
                        .guarded, release: truth.cohorts(version, releasedAt: releasedAt(version), fleet: fleet),
                        previous: truth.cohorts(version - 1, releasedAt: releasedAt(version - 1), fleet: fleet), now: evaluation)
                    if decision.outcome == .regressed {
                        expectedHalted.insert(version)
                        summary.append("ground truth: \(HealthScenario.versions[version].text) regressed at \(Timestamp.format(evaluation)): \(decision.summary)")
                    }
                }
                if expectedRaise == nil, let steadySince,
                    steadySince <= evaluation.addingTimeInterval(-Double(raise.windowDays) * 86_400)
                {
                    let figures = truth.raiseFigures(raise, now: evaluation)
                    if figures.active > 0, Double(figures.active - figures.below) >= raise.share * Double(figures.active),
                        figures.below < raise.maximumForced
                    {
                        expectedRaise = evaluation
                        summary.append(
                            "ground truth: raise to \(raise.version.text) due at \(Timestamp.format(evaluation)): "
                                + "\(figures.active - figures.below) of \(figures.active) active installs at or above, \(figures.below) below")
                    }
                }

                // What the server did at it.
                for version in 1..<published {
                    let release = try await http.get("/v1/apps/\(app)/releases/ios/\(HealthScenario.versions[version].text)", key: keys.read)
                    if release["rolloutPaused"] == .bool(true) { halted.insert(version) }
                }
                let policy = try await http.get("/v1/apps/\(app)/policies/ios", key: keys.read)
                if let text = policy["minimumVersion"]?.stringValue, let version = Version(text),
                    let index = HealthScenario.versions.lastIndex(where: { $0 <= version })
                {
                    minimum = index
                }
                let at = Timestamp.format(evaluation)
                if halted != expectedHalted {
                    differences.append(
                        "at \(at): the catalog has \(names(halted)) halted, the health rule's definition \(names(expectedHalted))")
                }
                if (minimum == HealthScenario.healthy) != (expectedRaise != nil) {
                    differences.append(
                        "at \(at): the minimum is \(minimum == 0 ? "unset" : HealthScenario.versions[minimum].text), the raise rule's "
                            + "definition says \(expectedRaise == nil ? "not yet" : "raised")")
                }
                if badHalt == nil, halted.contains(HealthScenario.bad) {
                    badHalt = (UTCDay(evaluation).number - UTCDay(releasedAt(HealthScenario.bad)).number, badShare.last ?? 0)
                }
                day += 1
                // Once both rules have acted (or the catalog went astray), the rest would only repeat.
                if !differences.isEmpty || (halted.contains(HealthScenario.bad) && minimum >= HealthScenario.healthy) { break }
            }
            progress.finish(events: posted)

            // The healthy release went out on its schedule, never held.
            let healthyRelease = try await http.get(
                "/v1/apps/\(app)/releases/ios/\(HealthScenario.versions[HealthScenario.healthy].text)", key: keys.read)
            let healthy = (percent: healthyRelease["rolloutPercent"]?.doubleValue ?? -1, halted: halted.contains(HealthScenario.healthy))
            summary.insert(
                "\(HealthScenario.versions[HealthScenario.healthy].text) (healthy): at \(healthy.percent) % by its schedule, "
                    + (healthy.halted ? "halted" : "not halted"), at: 0)
            if let badHalt {
                summary.insert(
                    String(
                        format: "%@ (%.3g times the exits on iOS %@): halted on day %d after its release, with %.1f %% of the day's active installs on it",
                        HealthScenario.versions[HealthScenario.bad].text, scenario.options.badFactor, HealthFleetModel.badOSMajor,
                        badHalt.age, 100 * badHalt.share),
                    at: 1)
            }
            for id in ["health-guard", "raise-1-1"] {
                let records = try await http.get("/v1/apps/\(app)/rules/ios/\(id)/records", key: keys.read)["records"]?.arrayValue ?? []
                for record in records where record["outcome"] == .string("acted") {
                    summary.append("rule \(id) acted at \(record["at"]?.stringValue ?? "?"): \(record["summary"]?.stringValue ?? "")")
                }
            }
            return Result(
                stored: stored, days: day, summary: summary, differences: differences, badHalt: badHalt,
                raisedAt: minimum == HealthScenario.healthy ? expectedRaise : nil, healthy: healthy)
        }

        func names(_ versions: Set<Int>) -> String {
            versions.isEmpty ? "none" : versions.sorted().map { HealthScenario.versions[$0].text }.joined(separator: ", ")
        }

        func event(_ type: String, _ install: Install, _ version: Int, at: Date, from: Int? = nil) -> JSONValue {
            var fields: [String: JSONValue] = [
                "id": .string(UUID().uuidString), "type": .string(type), "occurredAt": .string(Timestamp.format(at)),
                "installId": .string(install.id.uuidString), "platform": .string("ios"),
                "appVersion": .string(HealthScenario.versions[version].text), "osVersion": .string(install.osVersion),
            ]
            if let from { fields["fromVersion"] = .string(HealthScenario.versions[from].text) }
            return .object(fields)
        }

        /// Posts `events` in batches of 500, four at a time; each must be accepted.
        mutating func post(_ events: [JSONValue]) async throws {
            let batches = stride(from: 0, to: events.count, by: 500).map { Array(events[$0..<min($0 + 500, events.count)]) }
            let (http, key) = (http, keys.ingest)
            try await concurrentMap(batches, concurrency: 4) { batch in
                let answer = try await http.post("/v1/events", key: key, body: .object(["events": .array(batch)]))
                guard answer["accepted"]?.doubleValue == Double(batch.count) else {
                    throw HTTP.Failure(description: "POST /v1/events accepted fewer than \(batch.count): \(answer)")
                }
            }
            stored += events.count
            posted += events.count
        }

        /// Asks the check for each install (eight at a time): the version it offers, if any.
        func check(_ installs: [Int]) async throws -> [(Int, Int?)] {
            let (http, app, fleet) = (http, app, fleet)
            return try await concurrentMap(installs, concurrency: 8) { index in
                let install = fleet[index]
                let path = "/v1/apps/\(app)/check?platform=ios&version=\(HealthScenario.versions[install.version].text)"
                    + "&os=\(install.osVersion)&install=\(install.id.uuidString)"
                let (status, data) = try await http.request("GET", path, key: nil)
                guard status == 200 else { throw HTTP.Failure(description: "GET \(path): HTTP \(status)") }
                let answer = try JSONValue.parse(data)
                guard answer["action"]?.stringValue != "none", let text = answer["latestVersion"]?.stringValue, let latest = Version(text)
                else { return (index, nil) }
                return (index, HealthScenario.versions.firstIndex(of: latest))
            }
        }

        func awaitEvaluation(after count: Double) async throws {
            let deadline = ContinuousClock.now + .seconds(120)
            while try await http.metric("upshift_rule_evaluations_total", token: simulation.configuration.operatorToken) ?? 0 <= count {
                guard ContinuousClock.now < deadline else {
                    throw HTTP.Failure(description: "the rollout worker did not evaluate the rules within 120 s of the clock reaching 00:00")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        }
    }
}

/// Runs `body` over `items`, at most `concurrency` at once; the results in the order of `items`.
@discardableResult
func concurrentMap<Item: Sendable, Output: Sendable>(
    _ items: [Item], concurrency: Int, _ body: @escaping @Sendable (Item) async throws -> Output
) async throws -> [Output] {
    try await withThrowingTaskGroup(of: (Int, Output).self) { group in
        var results = [Output?](repeating: nil, count: items.count)
        var next = 0
        while next < min(concurrency, items.count) {
            let (index, item) = (next, items[next])
            group.addTask { (index, try await body(item)) }
            next += 1
        }
        while let (index, output) = try await group.next() {
            results[index] = output
            if next < items.count {
                let (index, item) = (next, items[next])
                group.addTask { (index, try await body(item)) }
                next += 1
            }
        }
        return results.map { $0! }
    }
}
