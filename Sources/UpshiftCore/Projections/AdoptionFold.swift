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

/// The install's last event of the day so far: its version and time.
public struct InstallDay: Sendable, Equatable {
    public var version: String
    public var versionSortKey: String
    public var lastAt: Date

    public init(version: String, versionSortKey: String, lastAt: Date) {
        self.version = version
        self.versionSortKey = versionSortKey
        self.lastAt = lastAt
    }
}

/// A cell of `adoption_daily`: installs of `version` on `day`.
public struct AdoptionCell: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var day: UTCDay
    public var version: String
}

/// Daily adoption (docs/PROJECTIONS.md, "What the reports count"): for each day, the number of installs
/// whose last event of that day carried each version. A late event moves its install from one version to
/// another on its own day (−1/+1). The per-install-per-day state is kept for the open window only: days
/// before `horizon(maxRecordedAt)` are closed and their state pruned. Each app has its own horizon, which
/// follows the largest `recorded_at` of the app's events read so far, so it is the same at every event
/// however the feed is batched, and one busy app closes no day of another.
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
            let new = InstallDay(version: version, versionSortKey: facts.version.sortKey, lastAt: event.occurredAt)
            let cell = AdoptionCell(appId: event.appId, platform: facts.platform, day: day, version: version)
            if let current = output.days[key] ?? stored[key] {
                // Ties in occurredAt go to the later event in the feed: this one.
                guard event.occurredAt >= current.lastAt else { continue }
                if current.version != version {
                    let old = AdoptionCell(appId: event.appId, platform: facts.platform, day: day, version: current.version)
                    output.cells[old, default: 0] -= 1
                    output.cells[cell, default: 0] += 1
                    output.versionSortKeys[current.version] = current.versionSortKey
                }
            } else {
                output.cells[cell, default: 0] += 1
            }
            output.versionSortKeys[version] = new.versionSortKey
            output.days[key] = new
        }
        output.cells = output.cells.filter { $0.value != 0 }
        return output
    }
}
