import Foundation

/// An install on a day, for the adoption working state (`install_days`).
public struct InstallDayKey: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var installId: UUID
    public var day: UTCDay

    public init(appId: AppID, platform: Platform, installId: UUID, day: UTCDay) {
        self.appId = appId
        self.platform = platform
        self.installId = installId
        self.day = day
    }
}

/// The install's last event of the day so far: its version, OS major and time; and the versions it
/// reported an abnormal exit of that day (sorted, each once).
public struct InstallDay: Sendable, Equatable {
    public var version: String
    public var versionSortKey: String
    public var osMajor: String
    public var lastAt: Date
    public var exited: [String]

    public init(version: String, versionSortKey: String, osMajor: String, lastAt: Date, exited: [String] = []) {
        self.version = version
        self.versionSortKey = versionSortKey
        self.osMajor = osMajor
        self.lastAt = lastAt
        self.exited = exited
    }

    /// `exited` as `install_days.exited` stores it: the versions separated by spaces (no version has one).
    public var exitedText: String { exited.joined(separator: " ") }

    public static func exited(fromText text: String) -> [String] {
        text.split(separator: " ").map(String.init)
    }

    /// The health cell this install-day counts in, and whether it counts as exited there.
    func healthCell(_ key: InstallDayKey) -> (HealthCell, HealthCounts) {
        (HealthCell(appId: key.appId, platform: key.platform, day: key.day, version: version, osMajor: osMajor),
         HealthCounts(installs: 1, exited: exited.contains(version) ? 1 : 0))
    }
}

/// The major of an OS version as release health groups installs: its leading ASCII digits (`17` of
/// `17.4.1`), `''` when it has none or the install reported no OS version. The backfill's SQL is
/// `coalesce(substring(os_version FROM '^[0-9]+'), '')`.
public enum OSMajor {
    public static func of(_ osVersion: String?) -> String {
        guard let osVersion else { return "" }
        return String(decoding: osVersion.utf8.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }, as: UTF8.self)
    }
}

/// A cell of `health_daily`: installs of `version` on `day` with an OS of major `osMajor`.
public struct HealthCell: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var day: UTCDay
    public var version: String
    public var osMajor: String
}

/// The figures of a health cell (or changes to them): installs active on the version that day, as
/// adoption counts them, and how many of those reported an abnormal exit of the version that day.
public struct HealthCounts: Sendable, Equatable {
    public var installs: Int
    public var exited: Int

    public init(installs: Int, exited: Int) {
        self.installs = installs
        self.exited = exited
    }

    static func += (lhs: inout HealthCounts, rhs: HealthCounts) {
        lhs.installs += rhs.installs
        lhs.exited += rhs.exited
    }

    static func -= (lhs: inout HealthCounts, rhs: HealthCounts) {
        lhs.installs -= rhs.installs
        lhs.exited -= rhs.exited
    }

    var isZero: Bool { installs == 0 && exited == 0 }
}

/// A cell of `adoption_daily`: installs of `version` on `day`.
public struct AdoptionCell: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var day: UTCDay
    public var version: String
}

/// Daily adoption and release health (docs/PROJECTIONS.md, "What the reports count"): for each day, the
/// number of installs whose last event of that day carried each version, and per version and OS major of
/// that last event, how many of those installs reported an abnormal exit of the version that day. A late
/// event moves its install from one cell to another on its own day (−1/+1). The per-install-per-day state
/// is kept for the open window only: days before `horizon(maxRecordedAt)` are closed and their state
/// pruned. Each app has its own horizon, which follows the largest `recorded_at` of the app's events read
/// so far, so it is the same at every event however the feed is batched, and one busy app closes no day
/// of another.
public enum AdoptionFold {
    /// Events are accepted up to 30 days late (by the server's clock, `recorded_at`); one more day
    /// covers transactions that commit out of `recorded_at` order.
    public static let openDays = 31

    /// The first day still open after reading events recorded up to `maxRecordedAt`.
    public static func horizon(maxRecordedAt: Date?) -> UTCDay? {
        maxRecordedAt.map { UTCDay($0).adding(days: -openDays) }
    }

    public struct Output: Sendable {
        /// Working-state rows to write (inserted or changed).
        public var days: [InstallDayKey: InstallDay] = [:]
        /// Non-zero changes to `adoption_daily`.
        public var cells: [AdoptionCell: Int] = [:]
        /// Non-zero changes to `health_daily`.
        public var health: [HealthCell: HealthCounts] = [:]
        /// Sort keys of the versions in `cells`.
        public var versionSortKeys: [String: String] = [:]
        /// The largest `recorded_at` read of each app whose events the batch held.
        public var maxRecordedAt: [AppID: Date] = [:]
        /// Events whose day had closed before they were read: not counted (possible only when a
        /// transaction commits over a day later than it recorded its events).
        public var closedDayEvents = 0
        public var deadLetters: [DeadLetter] = []
    }

    /// The working-state rows the fold of `events` needs to read.
    public static func keys(for events: [ProjectionEvent]) -> Set<InstallDayKey> {
        var keys = Set<InstallDayKey>()
        for event in events {
            guard let install = event.installId, let platform = event.platform.flatMap(Platform.init(validating:)) else { continue }
            keys.insert(InstallDayKey(appId: event.appId, platform: platform, installId: install, day: UTCDay(event.occurredAt)))
        }
        return keys
    }

    /// Folds events given in feed order, over the stored rows for `keys(for: events)` and the stored
    /// largest `recorded_at` of each of their apps.
    public static func fold(
        _ events: [ProjectionEvent], stored: [InstallDayKey: InstallDay], maxRecordedAt: [AppID: Date]
    ) -> Output {
        var output = Output()
        var maxima = maxRecordedAt
        var versions = VersionCache()
        for event in events {
            if maxima[event.appId].map({ event.recordedAt > $0 }) ?? true { maxima[event.appId] = event.recordedAt }
            output.maxRecordedAt[event.appId] = maxima[event.appId]
            let maxRecorded = maxima[event.appId]
            let facts: (install: UUID, platform: Platform, version: ParsedVersion)
            do {
                guard let found = try event.installFacts(&versions) else { continue }
                facts = found
            } catch {
                output.deadLetters.append(DeadLetter(event: event, error: error.description))
                continue
            }
            let day = UTCDay(event.occurredAt)
            if let horizon = horizon(maxRecordedAt: maxRecorded), day < horizon {
                output.closedDayEvents += 1
                continue
            }
            let key = InstallDayKey(appId: event.appId, platform: facts.platform, installId: facts.install, day: day)
            let version = facts.version.normalized
            output.versionSortKeys[version] = facts.version.sortKey
            let before = output.days[key] ?? stored[key]
            let after = merge(event, version: facts.version, into: before)
            guard after != before else { continue }
            if let before {
                output.versionSortKeys[before.version] = before.versionSortKey
                output.count(key, before, -1)
            }
            output.count(key, after, 1)
            output.days[key] = after
        }
        output.cells = output.cells.filter { $0.value != 0 }
        output.health = output.health.filter { !$0.value.isZero }
        return output
    }

    /// The install-day after `event` (of that install and day) given the state before it: the last event
    /// of the day by `occurredAt` (ties go to the later in the feed, this one) gives the version and OS
    /// major; an abnormal exit adds its version to `exited`.
    static func merge(_ event: ProjectionEvent, version parsed: ParsedVersion, into before: InstallDay?) -> InstallDay {
        let version = parsed.normalized
        let exit = event.type == EventType.abnormalExit.rawValue
        guard var after = before else {
            return InstallDay(
                version: version, versionSortKey: parsed.sortKey, osMajor: OSMajor.of(event.osVersion),
                lastAt: event.occurredAt, exited: exit ? [version] : [])
        }
        if exit, !after.exited.contains(version) { after.exited = (after.exited + [version]).sorted() }
        if event.occurredAt >= after.lastAt {
            after.version = version
            after.versionSortKey = parsed.sortKey
            after.osMajor = OSMajor.of(event.osVersion)
            after.lastAt = event.occurredAt
        }
        return after
    }

    /// What erasing installs takes out of the figures (docs/OPERATIONS.md, "Erasure of an install"): −1 for each of
    /// their install-days, from `stored` (their working state of the open days, as deleted) and, for days
    /// before `horizon` (closed, their state pruned), from `erased` (their events the generation applied,
    /// in feed order) as the fold counted them. Dead letters are not counted again.
    public static func forget(stored: [InstallDayKey: InstallDay], erased: [ProjectionEvent], horizons: [AppID: UTCDay]) -> Output {
        var closed: [InstallDayKey: InstallDay] = [:]
        var versions = VersionCache()
        for event in erased {
            guard let facts = try? event.installFacts(&versions) else { continue }
            let day = UTCDay(event.occurredAt)
            guard let horizon = horizons[event.appId], day < horizon else { continue }
            let key = InstallDayKey(appId: event.appId, platform: facts.platform, installId: facts.install, day: day)
            closed[key] = merge(event, version: facts.version, into: closed[key])
        }
        var output = Output()
        for (key, day) in stored.merging(closed, uniquingKeysWith: { open, _ in open }) {
            output.versionSortKeys[day.version] = day.versionSortKey
            output.count(key, day, -1)
        }
        output.cells = output.cells.filter { $0.value != 0 }
        output.health = output.health.filter { !$0.value.isZero }
        return output
    }
}

extension AdoptionFold.Output {
    /// Counts `day` (an install's state on its day) `sign` times in its adoption and health cells.
    mutating func count(_ key: InstallDayKey, _ day: InstallDay, _ sign: Int) {
        cells[AdoptionCell(appId: key.appId, platform: key.platform, day: key.day, version: day.version), default: 0] += sign
        let (cell, counts) = day.healthCell(key)
        var change = HealthCounts(installs: 0, exited: 0)
        if sign > 0 { change += counts } else { change -= counts }
        health[cell, default: HealthCounts(installs: 0, exited: 0)] += change
    }
}
