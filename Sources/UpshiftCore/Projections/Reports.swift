import Foundation

/// The reports (docs/PROJECTIONS.md, "What the reports count"), built from rows the store reads. JSON
/// through `Codable` (explicit `null`s), CSV through `csv`.
///
/// Each carries `dataAsOf`: the `recorded_at` of the newest event the projections it reads had applied,
/// read in the same snapshot as its figures (the oldest of them when it reads several; nil while one has
/// applied none). Read on a replica, it shows the replica's lag and the projections' lag together.

/// A report's `dataAsOf` in its JSON: the RFC 3339 timestamp, or an explicit `null` (a synthesized
/// `Encodable` would leave a nil out).
@propertyWrapper
public struct ReportTimestamp: Sendable, Equatable, Encodable {
    public var wrappedValue: Date?

    public init(wrappedValue: Date?) {
        self.wrappedValue = wrappedValue
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        if let wrappedValue { try container.encode(Timestamp.format(wrappedValue)) } else { try container.encodeNil() }
    }
}

/// Daily adoption: per day, active installs and installs per version (versions in version order).
public struct AdoptionReport: Sendable, Equatable, Encodable {
    public struct VersionCount: Sendable, Equatable, Encodable {
        public var version: String
        public var installs: Int

        public init(version: String, installs: Int) {
            self.version = version
            self.installs = installs
        }
    }

    public struct Day: Sendable, Equatable, Encodable {
        public var day: String
        public var activeInstalls: Int
        public var versions: [VersionCount]

        public init(day: String, activeInstalls: Int, versions: [VersionCount]) {
            self.day = day
            self.activeInstalls = activeInstalls
            self.versions = versions
        }
    }

    /// The longest range one request may ask for, in days.
    public static let maximumDays = 366

    public var app: AppID
    public var platform: Platform
    public var from: String
    public var to: String
    public var days: [Day]
    @ReportTimestamp public var dataAsOf: Date?
    /// The instant from which the figures count events (the `eventsFrom` of what the report read); not in
    /// the JSON: the answer's `Events-From` header says it.
    public var eventsFrom: Date?

    enum CodingKeys: String, CodingKey {
        case app, platform, from, to, days, dataAsOf
    }

    /// `rows` are `adoption_daily` cells in the range, in any order; every day of the range appears.
    public init(
        app: AppID, platform: Platform, from: UTCDay, to: UTCDay,
        rows: [(day: UTCDay, version: String, sortKey: String, installs: Int)], dataAsOf: Date?
    ) {
        self.app = app
        self.platform = platform
        self.from = from.description
        self.to = to.description
        self.dataAsOf = dataAsOf
        var byDay: [Int: [(version: String, sortKey: String, installs: Int)]] = [:]
        for row in rows where row.installs != 0 { byDay[row.day.number, default: []].append((row.version, row.sortKey, row.installs)) }
        days = (from.number...max(from.number, to.number)).map { number in
            let cells = (byDay[number] ?? []).sorted { $0.sortKey < $1.sortKey }
            return Day(
                day: UTCDay(number: number).description, activeInstalls: cells.reduce(0) { $0 + $1.installs },
                versions: cells.map { VersionCount(version: $0.version, installs: $0.installs) })
        }
    }

    public var csv: String {
        var table = CSVTable(header: ["day", "active_installs", "version", "installs"])
        for day in days {
            if day.versions.isEmpty { table.add([day.day, "0", "", "0"]) }
            for cell in day.versions { table.add([day.day, String(day.activeInstalls), cell.version, String(cell.installs)]) }
        }
        return table.text
    }
}

/// Time-to-update for one release (docs/PROJECTIONS.md, "What the reports count").
public struct ReleaseReport: Sendable, Equatable, Encodable {
    public struct Shares: Sendable, Equatable, Encodable {
        public var day1: Double?
        public var day7: Double?
        public var day30: Double?

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day1, forKey: .day1)
            try container.encode(day7, forKey: .day7)
            try container.encode(day30, forKey: .day30)
        }

        enum CodingKeys: String, CodingKey { case day1, day7, day30 }
    }

    public struct CurvePoint: Sendable, Equatable, Encodable {
        /// Days since the release.
        public var day: Int
        /// Cohort installs with T ≤ `day` days.
        public var updated: Int
        public var share: Double

        public init(day: Int, updated: Int, share: Double) {
            self.day = day
            self.updated = updated
            self.share = share
        }
    }

    /// The curve covers at most this many days after the release.
    public static let maximumCurveDays = 365

    public var app: AppID
    public var platform: Platform
    public var version: String
    public var releasedAt: String
    public var cohort: Int
    public var updated: Int
    public var updatedShare: Shares
    public var medianSeconds: Double?
    public var p90Seconds: Double?
    public var curve: [CurvePoint]
    public var health: ReleaseHealth
    @ReportTimestamp public var dataAsOf: Date?
    /// The instant from which the figures count events (the `eventsFrom` of what the report read); not in
    /// the JSON: the answer's `Events-From` header says it.
    public var eventsFrom: Date?

    /// The rank k = ⌈q · cohort⌉ whose T is the q-quantile by nearest rank; nil for an empty cohort.
    public static func rank(quantile: Double, cohort: Int) -> Int? {
        guard cohort > 0 else { return nil }
        // Integer arithmetic: q is given in hundredths (0.5, 0.9), so no rounding can shift the rank.
        let hundredths = Int((quantile * 100).rounded())
        return max(1, (hundredths * cohort + 99) / 100)
    }

    /// - Parameters:
    ///   - updatedByDay: cohort installs that updated, by ⌈T / 1 day⌉ (0 for T = 0).
    ///   - medianMilliseconds, p90Milliseconds: T at the nearest ranks, nil while fewer have updated.
    public init(
        app: AppID, platform: Platform, version: String, releasedAt: Date, now: Date, cohort: Int,
        updatedByDay: [Int: Int], medianMilliseconds: Int64?, p90Milliseconds: Int64?, health: ReleaseHealth,
        dataAsOf: Date?
    ) {
        self.health = health
        self.app = app
        self.platform = platform
        self.version = version
        self.dataAsOf = dataAsOf
        self.releasedAt = Timestamp.format(releasedAt)
        self.cohort = cohort
        updated = updatedByDay.values.reduce(0, +)
        func share(_ count: Int) -> Double? { cohort == 0 ? nil : Double(count) / Double(cohort) }
        func count(within days: Int) -> Int { updatedByDay.reduce(0) { $0 + ($1.key <= days ? $1.value : 0) } }
        updatedShare = Shares(day1: share(count(within: 1)), day7: share(count(within: 7)), day30: share(count(within: 30)))
        medianSeconds = medianMilliseconds.map { Double($0) / 1000 }
        p90Seconds = p90Milliseconds.map { Double($0) / 1000 }
        var curve: [CurvePoint] = []
        if now >= releasedAt, cohort > 0 {
            let days = min(Int(now.timeIntervalSince(releasedAt) / 86_400), Self.maximumCurveDays)
            var running = 0
            for day in 0...days {
                running += updatedByDay[day] ?? 0
                curve.append(CurvePoint(day: day, updated: running, share: Double(running) / Double(cohort)))
            }
        }
        self.curve = curve
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(app, forKey: .app)
        try container.encode(platform, forKey: .platform)
        try container.encode(version, forKey: .version)
        try container.encode(releasedAt, forKey: .releasedAt)
        try container.encode(cohort, forKey: .cohort)
        try container.encode(updated, forKey: .updated)
        try container.encode(updatedShare, forKey: .updatedShare)
        try container.encode(medianSeconds, forKey: .medianSeconds)
        try container.encode(p90Seconds, forKey: .p90Seconds)
        try container.encode(curve, forKey: .curve)
        try container.encode(health, forKey: .health)
        try container.encode(_dataAsOf, forKey: .dataAsOf)
    }

    enum CodingKeys: String, CodingKey {
        case app, platform, version, releasedAt, cohort, updated, updatedShare, medianSeconds, p90Seconds, curve, health
        case dataAsOf
    }

    /// A row per day since the release: the curve's point (empty for an empty cohort), then the day's health.
    public var csv: String {
        var table = CSVTable(header: [
            "day", "cohort", "updated", "share", "date", "active_installs", "exited", "exit_free_share",
            "previous_exit_free_share",
        ])
        func text(_ share: Double?) -> String { share.map { String($0) } ?? "" }
        for index in 0..<max(curve.count, health.days.count) {
            let point = index < curve.count ? curve[index] : nil
            let day = index < health.days.count ? health.days[index] : nil
            table.add([
                String(point?.day ?? day?.day ?? index), point == nil ? "" : String(cohort), point.map { String($0.updated) } ?? "",
                text(point?.share), day?.date ?? "", day.map { String($0.installs) } ?? "", day.map { String($0.exited) } ?? "",
                text(day?.exitFreeShare), text(day?.previousExitFreeShare),
            ])
        }
        return table.text
    }
}

/// Prompt funnels (docs/PROJECTIONS.md, "What the reports count"): distinct installs at each step, per
/// target version and kind.
public struct PromptFunnelReport: Sendable, Equatable, Encodable {
    public struct Funnel: Sendable, Equatable, Encodable {
        public var targetVersion: String
        public var promptKind: String
        public var shown: Int
        public var dismissedLater: Int
        public var dismissedSkip: Int
        public var updateStarted: Int
        public var blocked: Int
        public var converted: Int
        /// Installs that started the update and were seen on a version ≥ the target within 7 days of their
        /// first `update_started`.
        public var updatedAfterStart: Int

        public init(
            targetVersion: String, promptKind: String, shown: Int, dismissedLater: Int, dismissedSkip: Int,
            updateStarted: Int, blocked: Int, converted: Int, updatedAfterStart: Int
        ) {
            self.targetVersion = targetVersion
            self.promptKind = promptKind
            self.shown = shown
            self.dismissedLater = dismissedLater
            self.dismissedSkip = dismissedSkip
            self.updateStarted = updateStarted
            self.blocked = blocked
            self.converted = converted
            self.updatedAfterStart = updatedAfterStart
        }
    }

    /// Days after the first `prompt_shown` within which an install counts as converted.
    public static let conversionDays = 7

    public var app: AppID
    public var platform: Platform
    public var funnels: [Funnel]
    @ReportTimestamp public var dataAsOf: Date?
    /// The instant from which the figures count events (the `eventsFrom` of what the report read); not in
    /// the JSON: the answer's `Events-From` header says it.
    public var eventsFrom: Date?

    enum CodingKeys: String, CodingKey {
        case app, platform, funnels, dataAsOf
    }

    public init(app: AppID, platform: Platform, funnels: [Funnel], dataAsOf: Date?) {
        self.app = app
        self.platform = platform
        self.funnels = funnels
        self.dataAsOf = dataAsOf
    }

    public var csv: String {
        var table = CSVTable(header: [
            "target_version", "prompt_kind", "shown", "dismissed_later", "dismissed_skip", "update_started", "blocked",
            "converted", "updated_after_start",
        ])
        for funnel in funnels {
            table.add([
                funnel.targetVersion, funnel.promptKind, String(funnel.shown), String(funnel.dismissedLater),
                String(funnel.dismissedSkip), String(funnel.updateStarted), String(funnel.blocked), String(funnel.converted),
                String(funnel.updatedAfterStart),
            ])
        }
        return table.text
    }
}

/// What raising the minimum to a candidate would do (docs/PROJECTIONS.md, "What the reports count"):
/// among installs last seen within the window, how many are below it, and how many of those have no release ≥
/// it for their OS.
public struct MinimumImpactReport: Sendable, Equatable, Encodable {
    public struct Row: Sendable, Equatable, Encodable {
        /// The version, or the OS version (null: the install did not say).
        public var value: String?
        public var activeInstalls: Int
        public var below: Int
        public var unableToUpdate: Int
        /// Below the minimum and able to update: the blocking screen (the others are told `os_unsupported`).
        public var wouldBeBlocked: Int { below - unableToUpdate }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(value, forKey: .value)
            try container.encode(activeInstalls, forKey: .activeInstalls)
            try container.encode(below, forKey: .below)
            try container.encode(unableToUpdate, forKey: .unableToUpdate)
        }

        enum CodingKeys: String, CodingKey { case value, activeInstalls, below, unableToUpdate }
    }

    public static let defaultWindowDays = 7
    public static let maximumWindowDays = 90

    public var app: AppID
    public var platform: Platform
    public var candidateMinimum: String
    public var windowDays: Int
    public var activeInstalls: Int
    public var below: Int
    public var unableToUpdate: Int
    /// Below the minimum and able to update: the installs a raise would block.
    public var wouldBeBlocked: Int { below - unableToUpdate }
    public var byVersion: [Row]
    public var byOS: [Row]
    @ReportTimestamp public var dataAsOf: Date?
    /// The instant from which the figures count events (the `eventsFrom` of what the report read); not in
    /// the JSON: the answer's `Events-From` header says it.
    public var eventsFrom: Date?

    enum CodingKeys: String, CodingKey {
        case app, platform, candidateMinimum, windowDays, activeInstalls, below, unableToUpdate, byVersion, byOS, dataAsOf
    }

    /// Whether an install on `os` could install some release ≥ `minimum`: a live, released one on the
    /// live channel whose OS range admits it (an install that did not report its OS is assumed able).
    public static func canInstall(os: Version?, minimum: Version, releases: [Release], now: Date) -> Bool {
        releases.contains { release in
            release.version >= minimum && release.status == .live && release.channel == .live
                && release.releasedAt <= now && DecisionEngine.isCompatible(release, os: os)
        }
    }

    /// - Parameter groups: active installs by (current version, OS version).
    public init(
        app: AppID, platform: Platform, minimum: Version, windowDays: Int, releases: [Release], now: Date,
        groups: [(version: String, osVersion: String?, installs: Int)], dataAsOf: Date?
    ) {
        self.app = app
        self.platform = platform
        self.dataAsOf = dataAsOf
        candidateMinimum = minimum.text
        self.windowDays = windowDays
        var versions: [String: (sortKey: String, row: Row)] = [:]
        var systems: [String: (sortKey: String, row: Row)] = [:]
        var totals = Row(value: nil, activeInstalls: 0, below: 0, unableToUpdate: 0)
        for group in groups {
            let version = Version(group.version)
            let os = group.osVersion.flatMap(Version.init)
            let isBelow = version.map { $0 < minimum } ?? false
            let unable = isBelow && !Self.canInstall(os: os, minimum: minimum, releases: releases, now: now)
            func add(_ row: inout Row) {
                row.activeInstalls += group.installs
                if isBelow { row.below += group.installs }
                if unable { row.unableToUpdate += group.installs }
            }
            add(&totals)
            let versionKey = version?.sortKey ?? group.version
            add(&versions[group.version, default: (versionKey, Row(value: group.version, activeInstalls: 0, below: 0, unableToUpdate: 0))].row)
            let osName = group.osVersion ?? ""
            let osKey = os?.sortKey ?? "~" + osName
            add(&systems[osName, default: (osKey, Row(value: group.osVersion, activeInstalls: 0, below: 0, unableToUpdate: 0))].row)
        }
        activeInstalls = totals.activeInstalls
        below = totals.below
        unableToUpdate = totals.unableToUpdate
        byVersion = versions.values.sorted { $0.sortKey < $1.sortKey }.map(\.row)
        byOS = systems.values.sorted { $0.sortKey < $1.sortKey }.map(\.row)
    }

    public var csv: String {
        var table = CSVTable(header: ["dimension", "value", "active_installs", "below", "unable_to_update"])
        for (dimension, rows) in [("version", byVersion), ("os", byOS)] {
            for row in rows {
                table.add([dimension, row.value ?? "", String(row.activeInstalls), String(row.below), String(row.unableToUpdate)])
            }
        }
        return table.text
    }
}

/// RFC 4180 CSV: fields with a comma, quote or line break are quoted; lines end with CRLF.
public struct CSVTable: Sendable {
    public private(set) var text: String

    public init(header: [String]) {
        text = ""
        add(header)
    }

    public mutating func add(_ fields: [String]) {
        text += Self.line(fields)
    }

    /// One line of `fields`, with its CRLF.
    public static func line(_ fields: [String]) -> String {
        fields.map(escape).joined(separator: ",") + "\r\n"
    }

    static func escape(_ field: String) -> String {
        guard field.contains(where: { $0 == "," || $0 == "\"" || $0 == "\n" || $0 == "\r" }) else { return field }
        return "\"" + field.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
