import Foundation

/// A release's health in its report (docs/PROJECTIONS.md, "Release health"): per UTC day from the day of
/// its release, the installs active on it (as adoption counts them) and how many of those reported an
/// abnormal exit of it that day, summed over the OS majors; the same over its life (install-days); and,
/// at ages 1, 3 and 7 days, beside its previous release at the same age. Only installs whose SDK reports
/// abnormal exits can count as exited.
public struct ReleaseHealth: Sendable, Equatable, Encodable {
    public struct Day: Sendable, Equatable, Encodable {
        /// Days since the UTC day of the release.
        public var day: Int
        public var date: String
        public var installs: Int
        public var exited: Int
        public var exitFreeShare: Double?
        /// The previous release's at the same age; nil without a baseline.
        public var previousExitFreeShare: Double?

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try container.encode(date, forKey: .date)
            try container.encode(installs, forKey: .installs)
            try container.encode(exited, forKey: .exited)
            try container.encode(exitFreeShare, forKey: .exitFreeShare)
            try container.encode(previousExitFreeShare, forKey: .previousExitFreeShare)
        }

        enum CodingKeys: String, CodingKey { case day, date, installs, exited, exitFreeShare, previousExitFreeShare }
    }

    /// The release and its previous release at one age.
    public struct Age: Sendable, Equatable, Encodable {
        public var day: Int
        public var exitFreeShare: Double?
        public var previousExitFreeShare: Double?

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(day, forKey: .day)
            try container.encode(exitFreeShare, forKey: .exitFreeShare)
            try container.encode(previousExitFreeShare, forKey: .previousExitFreeShare)
        }

        enum CodingKeys: String, CodingKey { case day, exitFreeShare, previousExitFreeShare }
    }

    /// A release's days as the projection gives them, and when it was released.
    public struct Input: Sendable {
        public var version: String
        public var releasedAt: Date
        public var days: [UTCDay: HealthCounts]

        public init(version: String, releasedAt: Date, days: [UTCDay: HealthCounts]) {
            self.version = version
            self.releasedAt = releasedAt
            self.days = days
        }
    }

    /// The ages the report compares at.
    public static let ages = [1, 3, 7]
    public static let note = "counts only installs whose SDK reports abnormal exits"

    public var note = Self.note
    public var installDays: Int
    public var exitedInstallDays: Int
    public var exitFreeShare: Double?
    public var days: [Day]
    /// The newest live release of the platform and channel below this one, if any.
    public var previousVersion: String?
    /// `compared`, or `no baseline` when there is no previous release or it has no abnormal exit on record.
    public var baseline: String
    public var atAge: [Age]

    static func share(_ counts: HealthCounts?) -> Double? {
        guard let counts, counts.installs > 0 else { return nil }
        return Double(counts.installs - counts.exited) / Double(counts.installs)
    }

    /// - Parameters:
    ///   - release: its days, every day of the projection (days before its release count too: testers).
    ///   - previous: the previous release's, nil when there is none.
    public init(release: Input, previous: Input?, now: Date) {
        let first = UTCDay(release.releasedAt)
        let total = release.days.values.reduce(HealthCounts(installs: 0, exited: 0)) {
            HealthCounts(installs: $0.installs + $1.installs, exited: $0.exited + $1.exited)
        }
        installDays = total.installs
        exitedInstallDays = total.exited
        exitFreeShare = Self.share(total)
        previousVersion = previous?.version
        let baseline = previous.flatMap { $0.days.values.contains { $0.exited > 0 } ? $0 : nil }
        self.baseline = baseline == nil ? "no baseline" : "compared"
        func previousShare(age: Int) -> Double? {
            baseline.flatMap { Self.share($0.days[UTCDay($0.releasedAt).adding(days: age)]) }
        }
        var days: [Day] = []
        if now >= release.releasedAt {
            let last = min(UTCDay(now).number - first.number, ReleaseReport.maximumCurveDays)
            for age in 0...last {
                let date = first.adding(days: age)
                let counts = release.days[date] ?? HealthCounts(installs: 0, exited: 0)
                days.append(Day(day: age, date: date.description, installs: counts.installs, exited: counts.exited,
                                exitFreeShare: Self.share(counts), previousExitFreeShare: previousShare(age: age)))
            }
        }
        self.days = days
        atAge = Self.ages.map { age in
            Age(day: age, exitFreeShare: Self.share(release.days[first.adding(days: age)]),
                previousExitFreeShare: previousShare(age: age))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(note, forKey: .note)
        try container.encode(installDays, forKey: .installDays)
        try container.encode(exitedInstallDays, forKey: .exitedInstallDays)
        try container.encode(exitFreeShare, forKey: .exitFreeShare)
        try container.encode(days, forKey: .days)
        try container.encode(previousVersion, forKey: .previousVersion)
        try container.encode(baseline, forKey: .baseline)
        try container.encode(atAge, forKey: .atAge)
    }

    enum CodingKeys: String, CodingKey {
        case note, installDays, exitedInstallDays, exitFreeShare, days, previousVersion, baseline, atAge
    }

    /// The previous release of `release` among `releases` (one platform's): the newest live one of its
    /// channel below it.
    public static func previous(of release: Release, among releases: [Release]) -> Release? {
        releases.filter { $0.status == .live && $0.channel == release.channel && $0.version < release.version }
            .max { $0.version < $1.version }
    }
}
