import Foundation

/// The policy backtest (`POST /v1/apps/{app}/preview`): what the check would answer every install active in
/// a window, today and under a proposed catalog, through the same ``DecisionEngine`` at the same `now`.
///
/// An install's answer depends on its install id only through the buckets of releases whose rollout is
/// partial (above 0 and below 100 %, not halted): installs of one version, OS and channel are one cohort,
/// decided once, unless such a release newer than their version is a candidate in either catalog. Those
/// are decided per distinct pattern of admissions (one SHA-256 per install and partial release).
public enum Backtest {
    /// Installs the engine cannot tell apart without their buckets.
    public struct Cohort: Sendable, Hashable {
        public var version: String
        public var osVersion: String?
        public var channel: Channel

        public init(version: String, osVersion: String?, channel: Channel) {
            self.version = version
            self.osVersion = osVersion
            self.channel = channel
        }
    }

    /// Whether an install of `version` in `channel` may be answered differently by its bucket under one of
    /// `catalogs`: a release newer than it that the channel sees, out, live, with a partial rollout.
    public static func bucketMatters(version: String, channel: Channel, platform: String, catalogs: [AppCatalog], now: Date) -> Bool {
        guard let installed = Version(version) else { return false }
        return catalogs.contains { catalog in
            catalog.releases(for: platform).contains { release in
                isPartial(release, now: now) && release.version > installed && (channel == .beta || release.channel == .live)
            }
        }
    }

    static func isPartial(_ release: Release, now: Date) -> Bool {
        release.status == .live && release.releasedAt <= now && !release.rolloutPaused && release.rolloutPercent > 0
            && release.rolloutPercent < 100
    }

    /// Decides every cohort (`counts`: installs per cohort, whose buckets do not matter) and every install
    /// (`installs`: the cohort and id of each install whose bucket may matter) under both catalogs.
    public static func run(
        app: String, platform: String, windowDays: Int, now: Date, current: AppCatalog, proposed: AppCatalog,
        counts: [Cohort: Int], installs: [(Cohort, String)], dataAsOf: Date?
    ) -> BacktestReport {
        var rows: [RowKey: BacktestReport.Row] = [:]
        func record(_ cohort: Cohort, _ today: CheckDecision, _ next: CheckDecision, installs: Int) {
            let key = RowKey(version: cohort.version, osVersion: cohort.osVersion)
            var row = rows[key] ?? BacktestReport.Row(version: cohort.version, osVersion: cohort.osVersion)
            row.installs += installs
            row.today.add(today, installs)
            row.proposed.add(next, installs)
            if Answer(today) != Answer(next) { row.changed += installs }
            rows[key] = row
        }
        func decide(_ cohort: Cohort, install: String?) -> (CheckDecision, CheckDecision)? {
            guard let version = Version(cohort.version) else { return nil }
            let request = CheckRequest(
                platform: platform, version: version, os: cohort.osVersion.flatMap(Version.init), install: install,
                channel: cohort.channel)
            return (
                DecisionEngine.decide(request, catalog: current, now: now),
                DecisionEngine.decide(request, catalog: proposed, now: now)
            )
        }
        for (cohort, count) in counts {
            guard let (today, next) = decide(cohort, install: nil) else { continue }
            record(cohort, today, next, installs: count)
        }
        // Per install: the releases whose buckets may matter, and the pattern of what each admits.
        let partial = Set(
            [current, proposed].flatMap { $0.releases(for: platform) }.filter { isPartial($0, now: now) }.map(\.version.text)
        ).sorted()
        func percent(_ catalog: AppCatalog, _ version: String) -> Double? {
            catalog.releases(for: platform).first { $0.version.text == version && isPartial($0, now: now) }?.rolloutPercent
        }
        let percents = partial.map { (percent(current, $0), percent(proposed, $0)) }
        var decided: [PatternKey: (CheckDecision, CheckDecision)] = [:]
        for (cohort, install) in installs {
            var pattern: [Bool] = []
            pattern.reserveCapacity(partial.count * 2)
            for (index, version) in partial.enumerated() {
                let bucket = Rollout.bucket(appId: app, version: version, installId: install)
                for percent in [percents[index].0, percents[index].1] {
                    pattern.append(percent.map { Rollout.admits(bucket: bucket, percent: $0) } ?? false)
                }
            }
            let key = PatternKey(cohort: cohort, pattern: pattern)
            if decided[key] == nil { decided[key] = decide(cohort, install: install) }
            guard let (today, next) = decided[key] else { continue }
            record(cohort, today, next, installs: 1)
        }
        let ordered = rows.values.sorted {
            let (a, b) = (Version($0.version), Version($1.version))
            if let a, let b, a != b { return a > b }
            return ($0.version, $0.osVersion ?? "") < ($1.version, $1.osVersion ?? "")
        }
        var report = BacktestReport(
            app: app, platform: platform, windowDays: windowDays, now: now, rows: ordered, dataAsOf: dataAsOf)
        for row in ordered {
            report.installs += row.installs
            report.changed += row.changed
            report.today.merge(row.today)
            report.proposed.merge(row.proposed)
        }
        return report
    }

    /// What an install would notice of an answer: the action, the reason and the version it is sent to.
    struct Answer: Equatable {
        let action: CheckAction
        let reason: CheckReason
        let latestVersion: String?

        init(_ decision: CheckDecision) {
            action = decision.action
            reason = decision.reason
            latestVersion = decision.latestVersion
        }
    }

    struct RowKey: Hashable {
        let version: String
        let osVersion: String?
    }

    struct PatternKey: Hashable {
        let cohort: Cohort
        let pattern: [Bool]
    }
}

/// The backtest's answer: counts of `force`, `soft`, `none` and each reason, today and proposed, in all and
/// by version and OS, and how many installs would get another answer (action, reason or version).
public struct BacktestReport: Sendable, Encodable {
    public struct Tally: Sendable, Encodable, Equatable {
        public var force = 0
        public var soft = 0
        public var none = 0
        /// Installs by reason (`below_minimum`, `update_available`, `not_in_rollout` …).
        public var reasons: [String: Int] = [:]

        public init() {}

        mutating func add(_ decision: CheckDecision, _ installs: Int) {
            switch decision.action {
            case .force: force += installs
            case .soft: soft += installs
            case .none: none += installs
            }
            reasons[decision.reason.rawValue, default: 0] += installs
        }

        mutating func merge(_ other: Tally) {
            force += other.force
            soft += other.soft
            none += other.none
            reasons.merge(other.reasons, uniquingKeysWith: +)
        }
    }

    public struct Row: Sendable, Encodable, Equatable {
        /// As `install_state` spells it (`Version.normalized`).
        public var version: String
        public var osVersion: String?
        public var installs = 0
        public var today = Tally()
        public var proposed = Tally()
        public var changed = 0

        init(version: String, osVersion: String?) {
            self.version = version
            self.osVersion = osVersion
        }
    }

    public var app: String
    public var platform: String
    public var windowDays: Int
    public var now: Date
    public var installs = 0
    public var today = Tally()
    public var proposed = Tally()
    public var changed = 0
    /// Newest version first, then by OS.
    public var rows: [Row]
    public var dataAsOf: Date?

    init(app: String, platform: String, windowDays: Int, now: Date, rows: [Row], dataAsOf: Date?) {
        self.app = app
        self.platform = platform
        self.windowDays = windowDays
        self.now = now
        self.rows = rows
        self.dataAsOf = dataAsOf
    }

    public static let defaultWindowDays = 7
    public static let maximumWindowDays = 90

    enum CodingKeys: String, CodingKey {
        case app, platform, windowDays, now, installs, today, proposed, changed, rows, dataAsOf
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(app, forKey: .app)
        try container.encode(platform, forKey: .platform)
        try container.encode(windowDays, forKey: .windowDays)
        try container.encode(Timestamp.format(now), forKey: .now)
        try container.encode(installs, forKey: .installs)
        try container.encode(today, forKey: .today)
        try container.encode(proposed, forKey: .proposed)
        try container.encode(changed, forKey: .changed)
        try container.encode(rows, forKey: .rows)
        try container.encode(dataAsOf.map(Timestamp.format), forKey: .dataAsOf)
    }
}
