import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The reports as docs/PROJECTIONS.md defines them ("What the reports count"), computed from what the
/// simulation saw stored, and compared with what the server answers. Returns the differences, one line each
/// (empty: equal).
struct GroundTruth {
    let facts: [Fact]
    let releases: [PlannedRelease]
    let start: Date
    let end: Date

    func compare(with http: HTTP, app: AppID, key: String) async throws -> [String] {
        var differences = ambiguousInstants()
        differences += try await compareAdoption(http, app: app, key: key)
        for release in releases where release.at >= start {
            differences += try await compareRelease(release, http, app: app, key: key)
        }
        differences += try await compareFunnels(http, app: app, key: key)
        differences += try await comparePhased(http, app: app, key: key)
        return differences
    }

    /// Installs the fleet saw on two versions at one instant. The server orders such ties by where it
    /// stored each event, and a check's observation is stored in the background, after events that
    /// followed it; the simulation's clock must keep an update and the next launch apart, or the ground
    /// truth's "last version of the day" is a coin toss.
    func ambiguousInstants() -> [String] {
        var versions: [String: [Date: Set<String>]] = [:]
        for fact in facts { versions[fact.install, default: [:]][fact.at, default: []].insert(Self.normalized(fact.version)) }
        return versions.flatMap { install, instants in
            instants.filter { $0.value.count > 1 }.map { at, seen in
                "simulation: install \(install) was seen on \(seen.sorted()) at one instant, \(Timestamp.format(at))"
            }
        }.sorted().prefix(20).map(\.self)
    }

    // MARK: A phased rollout

    /// The phased release, when the run has one.
    var phased: PlannedRelease? { releases.first { $0.phased && $0.at >= start } }

    /// The checks the phased release's rule decides: asked by an install below it while it is the newest
    /// release out. Each must offer it exactly when the step in force admits the install's bucket.
    func phasedChecks(app: AppID) -> (checks: Int, admitted: Int, wrong: [String]) {
        guard let release = phased, let version = Version(release.version) else { return (0, 0, []) }
        let until = releases.filter { $0.at > release.at }.map(\.at).min() ?? end
        var checks = 0
        var admitted = 0
        var wrong: [String] = []
        for fact in facts where fact.type == "checked" && fact.at >= release.at && fact.at < until {
            guard let installed = Version(fact.version), installed < version else { continue }
            checks += 1
            let bucket = Rollout.bucket(appId: app, version: release.version, installId: fact.install)
            let admits = Double(bucket) < release.percent(at: fact.at) * 100
            if admits { admitted += 1 }
            if admits != (fact.offered == release.version) {
                wrong.append(
                    "phased \(release.version): the check of \(fact.install) on \(fact.version) at \(Timestamp.format(fact.at)) offered "
                        + "\(fact.offered ?? "nothing"), but bucket \(bucket) is \(admits ? "" : "not ")admitted at "
                        + "\(release.percent(at: fact.at).formatted())%")
            }
        }
        return (checks, admitted, wrong)
    }

    /// Every check the phased rollout decides, and its history: one write by the schedule per step.
    private func comparePhased(_ http: HTTP, app: AppID, key: String) async throws -> [String] {
        guard let release = phased else { return [] }
        var differences = Array(phasedChecks(app: app).wrong.prefix(20))
        let history = try await http.get("/v1/apps/\(app)/history?limit=500", key: key)
        let steps = (history["entries"]?.arrayValue ?? []).filter {
            $0["actor"]?.stringValue == CatalogEvent.scheduleActor && $0["releaseVersion"]?.stringValue == release.version
        }
        let due = RolloutSchedule.appStoreSteps.dropFirst().filter { release.at.addingTimeInterval($0.afterHours * 3_600) <= end }
        let written = steps.compactMap { $0["changes"]?["rolloutPercent"]?["to"]?.doubleValue }.sorted()
        if written != due.map(\.percent) {
            differences.append("phased \(release.version): the schedule wrote \(written) to the history, expected \(due.map(\.percent))")
        }
        return differences
    }

    static func normalized(_ version: String) -> String { Version(version)?.normalized ?? version }

    static func day(_ date: Date) -> String { Timestamp.day(date) }

    // MARK: Adoption

    private func compareAdoption(_ http: HTTP, app: AppID, key: String) async throws -> [String] {
        // Each install's last event of each day (ties: the later stored).
        var last: [String: Fact] = [:]
        for fact in facts {
            let id = fact.install + " " + Self.day(fact.at)
            if let current = last[id], (current.at, current.order) > (fact.at, fact.order) { continue }
            last[id] = fact
        }
        var expected: [String: [String: Int]] = [:]
        for fact in last.values { expected[Self.day(fact.at), default: [:]][Self.normalized(fact.version), default: 0] += 1 }
        let from = Self.day(start)
        let to = Self.day(end.addingTimeInterval(-1))
        let report = try await http.get("/v1/apps/\(app)/reports/adoption?platform=ios&from=\(from)&to=\(to)", key: key)
        var differences: [String] = []
        var answered: [String: [String: Int]] = [:]
        for day in report["days"]?.arrayValue ?? [] {
            guard let name = day["day"]?.stringValue else { continue }
            var versions: [String: Int] = [:]
            for cell in day["versions"]?.arrayValue ?? [] {
                if let version = cell["version"]?.stringValue, let installs = cell["installs"]?.intValue, installs > 0 {
                    versions[version] = installs
                }
            }
            if !versions.isEmpty { answered[name] = versions }
        }
        for day in Set(expected.keys).union(answered.keys).sorted() where expected[day] != answered[day] {
            differences.append("adoption \(day): expected \(expected[day] ?? [:]), the server says \(answered[day] ?? [:])")
        }
        return differences
    }

    // MARK: Time to update

    /// Share of each release's cohort updated by day 1, 7 and 30, for the releases of the period.
    func summary(app: AppID) -> String {
        var phasedLine = ""
        if let release = phased {
            let (checks, admitted, wrong) = phasedChecks(app: app)
            phasedLine = "; phased \(release.version): \(checks) checks decided by its schedule (\(admitted) admitted), "
                + "\(checks - wrong.count) offered it exactly when the step in force admitted the install"
        }
        return releases.filter { $0.at >= start }.map { release in
            let (cohort, times) = timesToUpdate(release)
            func share(_ days: Double) -> String {
                cohort == 0 ? "–" : "\(Int((Double(times.filter { $0 <= days * 86_400 }.count) / Double(cohort) * 100).rounded()))%"
            }
            return "\(release.version): cohort \(cohort), updated by day 1 \(share(1)), day 7 \(share(7)), day 30 \(share(30))"
        }.joined(separator: "; ") + phasedLine
    }

    /// The release's cohort size and the times to update (seconds) of those that updated, sorted.
    private func timesToUpdate(_ release: PlannedRelease) -> (cohort: Int, times: [Double]) {
        let version = Version(release.version)!
        let windowStart = release.at.addingTimeInterval(-7 * 86_400)
        var lastBefore: [String: Fact] = [:]
        var firstAtOrAbove: [String: Date] = [:]
        for fact in facts {
            guard let seen = Version(fact.version) else { continue }
            if fact.at >= windowStart, fact.at < release.at {
                if let current = lastBefore[fact.install], (current.at, current.order) > (fact.at, fact.order) { continue }
                lastBefore[fact.install] = fact
            }
            if fact.at >= release.at, seen >= version {
                firstAtOrAbove[fact.install] = min(firstAtOrAbove[fact.install] ?? fact.at, fact.at)
            }
        }
        let cohort = lastBefore.values.filter { Version($0.version)! < version }.map(\.install)
        return (cohort.count, cohort.compactMap { firstAtOrAbove[$0].map { $0.timeIntervalSince(release.at) } }.sorted())
    }

    private func compareRelease(_ release: PlannedRelease, _ http: HTTP, app: AppID, key: String) async throws -> [String] {
        let (cohort, times) = timesToUpdate(release)
        func quantile(_ percent: Int) -> Double? {
            let rank = (percent * cohort + 99) / 100
            return rank >= 1 && times.count >= rank ? times[rank - 1] : nil
        }
        func share(_ days: Double) -> Double? {
            cohort == 0 ? nil : Double(times.filter { $0 <= days * 86_400 }.count) / Double(cohort)
        }
        let report = try await http.get("/v1/apps/\(app)/reports/releases/\(release.version)?platform=ios", key: key)
        let label = "release \(release.version)"
        var differences: [String] = []
        func check(_ field: String, _ expected: Double?, _ answered: Double?) {
            let equal = expected == nil ? answered == nil : answered.map { abs($0 - expected!) < 1e-9 } ?? false
            if !equal { differences.append("\(label) \(field): expected \(expected.map { "\($0)" } ?? "null"), the server says \(answered.map { "\($0)" } ?? "null")") }
        }
        check("cohort", Double(cohort), report["cohort"]?.doubleValue)
        check("updated", Double(times.count), report["updated"]?.doubleValue)
        check("medianSeconds", quantile(50), report["medianSeconds"]?.doubleValue)
        check("p90Seconds", quantile(90), report["p90Seconds"]?.doubleValue)
        for (name, days) in [("day1", 1.0), ("day7", 7.0), ("day30", 30.0)] {
            check("updatedShare.\(name)", share(days), report["updatedShare"]?[name]?.doubleValue)
        }
        return differences
    }

    // MARK: Prompt funnel

    private func compareFunnels(_ http: HTTP, app: AppID, key: String) async throws -> [String] {
        struct Key: Hashable, Comparable {
            var target: String
            var kind: String
            static func < (a: Key, b: Key) -> Bool { (a.target, a.kind) < (b.target, b.kind) }
        }
        struct Marks {
            var shown: [String: Date] = [:]
            var later = Set<String>(), skip = Set<String>(), started = Set<String>(), blocked = Set<String>()
            var firstStarted: [String: Date] = [:]
        }
        var funnels: [Key: Marks] = [:]
        // When each install was first seen on each version (what conversion reads).
        var firstSeen: [String: [String: Date]] = [:]
        for fact in facts {
            let version = Self.normalized(fact.version)
            firstSeen[fact.install, default: [:]][version] = min(firstSeen[fact.install]?[version] ?? fact.at, fact.at)
            guard let target = fact.target, let kind = fact.kind else { continue }
            let key = Key(target: Self.normalized(target), kind: kind)
            switch fact.type {
            case "prompt_shown":
                funnels[key, default: Marks()].shown[fact.install] = min(funnels[key]?.shown[fact.install] ?? fact.at, fact.at)
            case "prompt_dismissed":
                if fact.action == "later" { funnels[key, default: Marks()].later.insert(fact.install) }
                if fact.action == "skip" { funnels[key, default: Marks()].skip.insert(fact.install) }
            case "update_started":
                funnels[key, default: Marks()].started.insert(fact.install)
                funnels[key]!.firstStarted[fact.install] = min(funnels[key]!.firstStarted[fact.install] ?? fact.at, fact.at)
            case "blocked": funnels[key, default: Marks()].blocked.insert(fact.install)
            default: break
            }
        }
        let report = try await http.get("/v1/apps/\(app)/reports/prompts?platform=ios", key: key)
        var answered: [Key: [Int]] = [:]
        for funnel in report["funnels"]?.arrayValue ?? [] {
            guard let target = funnel["targetVersion"]?.stringValue, let kind = funnel["promptKind"]?.stringValue else { continue }
            answered[Key(target: target, kind: kind)] = [
                "shown", "dismissedLater", "dismissedSkip", "updateStarted", "blocked", "converted", "updatedAfterStart",
            ]
                .map { funnel[$0]?.intValue ?? -1 }
        }
        var expected: [Key: [Int]] = [:]
        for (key, marks) in funnels {
            let target = Version(key.target)!
            // Seen on a version ≥ the target within 7 days of each install's start.
            func reached(within starts: [String: Date]) -> Int {
                starts.filter { install, start in
                    (firstSeen[install] ?? [:]).contains { version, first in
                        Version(version).map { $0 >= target } == true && first >= start && first <= start.addingTimeInterval(7 * 86_400)
                    }
                }.count
            }
            expected[key] = [
                marks.shown.count, marks.later.count, marks.skip.count, marks.started.count, marks.blocked.count,
                reached(within: marks.shown), reached(within: marks.firstStarted),
            ]
        }
        let fields = "shown, later, skip, started, blocked, converted, updated after starting"
        return Set(expected.keys).union(answered.keys).sorted().compactMap { key in
            expected[key] == answered[key]
                ? nil
                : "prompts \(key.target) \(key.kind) (\(fields)): expected \(expected[key] ?? []), the server says \(answered[key] ?? [])"
        }
    }
}

extension FleetSimulation {
    /// Waits until the log holds `expected` rows of the app (check observations are written in the
    /// background) and every projection has applied every event. A check observation the server dropped
    /// (its writer failed a flush, or refused observations for a moment after one) is never stored, so
    /// the reports cannot equal the ground truth: once the server counts one and rows are still missing
    /// a while later, that fails, naming the server's own counts. (A flush that outlived its timeout
    /// counts its observations as dropped, yet may still commit: the rows then arrive, and nothing is
    /// missing.)
    func waitForStoredEvents(expected: Int, http: HTTP) async throws {
        let (settings, app, token) = (configuration.database, options.appId, configuration.operatorToken)
        let deadline = ContinuousClock.now + .seconds(300)
        let grace = configuration.ingestion.flushTimeout + .seconds(5)
        @Sendable func serverCounts(stored: Int) async -> String {
            let dropped = (try? await http.metric("upshift_check_observations_dropped_total", token: token)) ?? nil
            let failures = (try? await http.metric("upshift_ingest_flush_failures_total", token: token)) ?? nil
            return "stored \(stored) of \(expected) rows; the server counts \(dropped.map { "\(Int($0))" } ?? "no") check "
                + "observations dropped and \(failures.map { "\(Int($0))" } ?? "no") failed flushes of its event log writer"
        }
        try await Database.withPool(settings, logger: logger) { pool, logger in
            let (log, projections) = (EventLog(pool: pool, logger: logger), ProjectionStore(pool: pool, logger: logger))
            var stored = 0
            var missingSince: ContinuousClock.Instant?
            while ContinuousClock.now < deadline {
                stored = try await log.installEventCount(app: app)
                if stored >= expected {
                    if try await projections.activeBehind() == 0 { return }
                } else if let dropped = try await http.metric("upshift_check_observations_dropped_total", token: token), dropped > 0 {
                    let since = missingSince ?? .now
                    missingSince = since
                    if ContinuousClock.now - since > grace {
                        let counts = await serverCounts(stored: stored)
                        throw HTTP.Failure(description: "the server dropped check observations, so its reports cannot equal the ground truth: \(counts)")
                    }
                }
                try await Task.sleep(for: .milliseconds(200))
            }
            let counts = await serverCounts(stored: stored)
            throw HTTP.Failure(description: "the server did not store and project \(expected) events within 300 s: \(counts)")
        }
    }
}

/// The policy backtest made just before the minimum raise, held against the fleet's facts stored by then:
/// the installs active in the window (each at the version of its latest fact) and, under the proposed
/// minimum, those below it forced (every one can update: the minimum's release is out to everyone and runs
/// on every device of the fleet), and none forced today.
struct Prediction {
    static let windowDays = 7
    var summary: String
    var differences: [String] = []

    init(report: JSONValue, facts: [Fact], now: Date, minimum: String) {
        let since = now.addingTimeInterval(-Double(Self.windowDays) * 86_400)
        var latest: [String: Fact] = [:]
        for fact in facts where fact.at >= since && fact.at <= now {
            if let current = latest[fact.install], (current.at, current.order) > (fact.at, fact.order) { continue }
            latest[fact.install] = fact
        }
        let floor = Version(minimum)!
        var below: [String: Int] = [:]
        for fact in latest.values {
            guard let version = Version(fact.version), version < floor else { continue }
            below[version.normalized, default: 0] += 1
        }
        var predicted: [String: Int] = [:]
        for row in report["rows"]?.arrayValue ?? [] {
            guard let version = row["version"]?.stringValue, let force = row["proposed"]?["force"]?.intValue, force > 0 else { continue }
            predicted[version, default: 0] += force
        }
        let forced = below.values.reduce(0, +)
        summary = "the backtest before the minimum raise predicted \(report["proposed"]?["force"]?.intValue ?? -1) forced "
            + "of \(report["installs"]?.intValue ?? -1) active installs (facts: \(forced) of \(latest.count))"
        if report["installs"]?.intValue != latest.count {
            differences.append("backtest: \(report["installs"]?.intValue ?? -1) installs active in \(Self.windowDays) days, the facts say \(latest.count)")
        }
        if predicted != below {
            differences.append("backtest: forced by version \(predicted.sorted { $0.key < $1.key }), the facts say \(below.sorted { $0.key < $1.key })")
        }
        if report["today"]?["force"]?.intValue != 0 {
            differences.append("backtest: \(report["today"]?["force"]?.intValue ?? -1) forced before the raise, expected none")
        }
    }
}
