import Foundation

/// The policy backtest (`POST /v1/apps/{app}/preview`): what the check would answer every install active in
/// a window, today and under a proposed catalog, through the same ``DecisionEngine`` at the same `now`.
///
/// An install's answer depends on its install id only through the buckets of releases whose rollout is
/// partial (above 0 and below 100 %, not halted): installs of one version, OS and channel are one cohort,
/// decided once, unless such a release newer than their version is a candidate in either catalog. Those
/// are decided per distinct pattern of admissions (one SHA-256 per install and partial release, ``Rollout/Hasher``).
public enum Backtest {
    /// The ids of a cohort's installs, packed: 16 bytes (the UUID's) each, as the database sends them.
    public struct InstallIDs: Sendable {
        public let bytes: [UInt8]
        public var count: Int { bytes.count / 16 }

        public init(packed bytes: [UInt8]) {
            self.bytes = Array(bytes.prefix(bytes.count - bytes.count % 16))
        }

        public func id(at index: Int) -> UUID {
            bytes.withUnsafeBytes { raw in
                var uuid: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                withUnsafeMutableBytes(of: &uuid) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: raw[16 * index..<16 * index + 16])) }
                return UUID(uuid: uuid)
            }
        }
    }

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

    /// Where installs' buckets may matter: below the newest release with a partial rollout that their
    /// channel sees (a beta install sees every release, a live one live releases), in either catalog. An
    /// install of a version newer than every such release is answered alike whatever its bucket.
    public struct IDsBelow: Sendable, Equatable {
        /// The newest partial release a live install sees; nil: none.
        public var live: Version?
        /// The newest partial release a beta install sees.
        public var beta: Version

        public init(live: Version?, beta: Version) {
            self.live = live
            self.beta = beta
        }

        /// Whether the answer to an install of `version` in `channel` may depend on its bucket.
        public func bucketMatters(version: Version, channel: Channel) -> Bool {
            guard let below = channel == .beta ? beta : live else { return false }
            return version < below
        }
    }

    /// Where buckets may matter under `catalogs`; nil when no release of `platform` has a partial rollout,
    /// so that no install's bucket matters.
    public static func idsBelow(platform: Platform, catalogs: [AppCatalog], now: Date) -> IDsBelow? {
        let partial = partialReleases(platform: platform, catalogs: catalogs, now: now)
        guard let beta = partial.map(\.version).max() else { return nil }
        return IDsBelow(live: partial.filter { $0.channel == .live }.map(\.version).max(), beta: beta)
    }

    /// Whether an install's channel may change its answer under `catalogs`: only where a release of
    /// `platform` is in the beta channel (a live install is never offered one; DecisionEngine's candidates).
    public static func channelMatters(platform: Platform, catalogs: [AppCatalog]) -> Bool {
        catalogs.contains { $0.releases(for: platform).contains { $0.channel == .beta } }
    }

    /// The releases of `platform` with a partial rollout in any of `catalogs` (one entry per catalog).
    static func partialReleases(platform: Platform, catalogs: [AppCatalog], now: Date) -> [Release] {
        catalogs.flatMap { $0.releases(for: platform) }.filter { isPartial($0, now: now) }
    }

    static func isPartial(_ release: Release, now: Date) -> Bool {
        release.status == .live && release.releasedAt <= now && !release.rolloutPaused && release.rolloutPercent > 0
            && release.rolloutPercent < 100
    }

    /// The most buckets one backtest computes (an install's bucket for each partial release newer than
    /// it): some 7 CPU-seconds, 3.5 s on two cores; a million installs below 20 partial releases.
    public static let maximumBuckets = 20_000_000

    /// Installs the hashing takes at a time, per task: about 65,536 buckets (some 20 ms), so that the
    /// requests the server answers meanwhile wait no longer than that for a thread, however many partial
    /// releases an install is below.
    static func installsPerTask(buckets perInstall: Int) -> Int {
        max(256, 65_536 / max(1, perInstall))
    }

    /// Decides every cohort (`counts`: installs per cohort, whose buckets do not matter) and every install
    /// (`installs`: the ids of each cohort whose buckets may matter) under both catalogs. Throws a
    /// ``FieldError`` on `releases` (answered `422`) when the installs' buckets number more than `maximumBuckets`.
    public static func run(
        app: AppID, platform: Platform, windowDays: Int, now: Date, current: AppCatalog, proposed: AppCatalog,
        counts: [Cohort: Int], installs: [(Cohort, InstallIDs)], dataAsOf: Date?, maximumBuckets: Int = maximumBuckets
    ) async throws -> BacktestReport {
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
        // Per install: the releases whose buckets may matter to the cohort, and the pattern of what each
        // admits under each catalog; one decision per cohort and pattern, with an install of that pattern.
        let rolling = partialReleases(platform: platform, catalogs: [current, proposed], now: now)
        let partial = Set(rolling.map(\.version)).sorted()
        // A live install is never offered a beta release: its bucket matters only where some catalog
        // rolls the version out partly to live installs (as `IDsBelow`).
        let partialForLive = Set(rolling.filter { $0.channel == .live }.map(\.version))
        func admitted(_ catalog: AppCatalog, _ version: Version) -> Int? {
            catalog.releases(for: platform).first { $0.version == version && isPartial($0, now: now) }
                .map { Rollout.admittedBuckets(percent: $0.rolloutPercent) }
        }
        // Buckets below these are admitted (0: none), today and proposed.
        let thresholds = partial.map { (admitted(current, $0) ?? 0, admitted(proposed, $0) ?? 0) }
        // Per cohort, the partial releases newer than its version that its channel sees: a bucket of
        // each, for each install.
        let relevant = installs.map { cohort in
            Version(cohort.0.version).map { installed in
                partial.indices.filter { partial[$0] > installed && (cohort.0.channel == .beta || partialForLive.contains(partial[$0])) }
            } ?? []
        }
        let buckets = zip(installs, relevant).reduce(0) { $0 + $1.0.1.count * $1.1.count }
        guard buckets <= maximumBuckets else {
            throw FieldError(
                "releases",
                "the backtest would compute \(buckets) rollout buckets (each install below a partial rollout, once per such "
                    + "release), more than the \(maximumBuckets) it computes at once: propose fewer partial rollouts, or a shorter window",
                kind: .inconsistent)
        }
        // The installs' patterns, in parts hashed on all cores at once.
        let work = installs.indices.flatMap { cohort in
            let part = installsPerTask(buckets: relevant[cohort].count)
            return stride(from: 0, to: installs[cohort].1.count, by: part).map { (cohort, $0 ..< min($0 + part, installs[cohort].1.count)) }
        }
        let found = await withTaskGroup(of: (Int, Patterns).self) { group in
            for (cohort, range) in work {
                let (ids, hashers) = (installs[cohort].1, relevant[cohort].map { Rollout.Hasher(appId: app, version: partial[$0].text) })
                let limits = relevant[cohort].map { thresholds[$0] }
                group.addTask { (cohort, Self.patterns(of: ids, range, hashers: hashers, thresholds: limits)) }
            }
            var found = [Patterns](repeating: [:], count: installs.count)
            for await (cohort, patterns) in group {
                found[cohort].merge(patterns) { ($0.first, $0.installs + $1.installs) }
            }
            return found
        }
        for (cohort, patterns) in zip(installs, found) {
            for (first, count) in patterns.values {
                guard let (today, next) = decide(cohort.0, install: cohort.1.id(at: first).uuidString.lowercased()) else { continue }
                record(cohort.0, today, next, installs: count)
            }
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

    /// Installs by pattern of admissions (two bits per relevant partial release: today, proposed): the
    /// index of the first install with it, and how many have it.
    typealias Patterns = [[UInt64]: (first: Int, installs: Int)]

    /// The patterns of the installs `range` of `ids`: bit 2i is whether the i-th release (of `hashers`)
    /// admits the install today, bit 2i + 1 whether it does proposed (`thresholds`: buckets below these).
    static func patterns(of ids: InstallIDs, _ range: Range<Int>, hashers: [Rollout.Hasher], thresholds: [(Int, Int)]) -> Patterns {
        var hashers = hashers
        var patterns: Patterns = [:]
        var pattern = [UInt64](repeating: 0, count: (2 * hashers.count + 63) / 64)
        ids.bytes.withUnsafeBytes { bytes in
            for install in range {
                for word in pattern.indices { pattern[word] = 0 }
                for index in hashers.indices {
                    let bucket = hashers[index].bucket(ofInstallAt: 16 * install, in: bytes)
                    if bucket < thresholds[index].0 { pattern[(2 * index) / 64] |= 1 << UInt64((2 * index) % 64) }
                    if bucket < thresholds[index].1 { pattern[(2 * index + 1) / 64] |= 1 << UInt64((2 * index + 1) % 64) }
                }
                patterns[pattern, default: (install, 0)].installs += 1
            }
        }
        return patterns
    }

    struct RowKey: Hashable {
        let version: String
        let osVersion: String?
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

    public var app: AppID
    public var platform: Platform
    public var windowDays: Int
    public var now: Date
    public var installs = 0
    public var today = Tally()
    public var proposed = Tally()
    public var changed = 0
    /// Newest version first, then by OS.
    public var rows: [Row]
    public var dataAsOf: Date?
    /// The instant from which the figures count events (the `eventsFrom` of what the report read); not in
    /// the JSON: the answer's `Events-From` header says it.
    public var eventsFrom: Date?

    init(app: AppID, platform: Platform, windowDays: Int, now: Date, rows: [Row], dataAsOf: Date?) {
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
