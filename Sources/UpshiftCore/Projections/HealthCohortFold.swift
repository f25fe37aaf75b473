import Foundation

/// An install's first event on a version (its time and OS major) and its first abnormal exit of it.
public struct InstallVersion: Sendable, Equatable {
    public var versionSortKey: String
    public var firstAt: Date
    public var osMajor: String
    public var exitAt: Date?

    public init(versionSortKey: String, firstAt: Date, osMajor: String, exitAt: Date?) {
        self.versionSortKey = versionSortKey
        self.firstAt = firstAt
        self.osMajor = osMajor
        self.exitAt = exitAt
    }

    /// Whether it counts as exited in its cohort: an abnormal exit within ``HealthCohort/exitWindow`` of
    /// its first event on the version.
    public var exitedInWindow: Bool {
        exitAt.map { $0.microseconds < firstAt.microseconds + HealthCohort.exitWindowMicroseconds } ?? false
    }

    func cohortCell(_ key: InstallVersionKey) -> (HealthCohort, HealthCounts) {
        (HealthCohort(appId: key.appId, platform: key.platform, version: key.version, osMajor: osMajor, day: UTCDay(firstAt)),
         HealthCounts(installs: 1, exited: exitedInWindow ? 1 : 0))
    }
}

/// A cell of `health_cohorts`: the installs first seen on `version` on `day` with an OS of major
/// `osMajor`, each counted once, and how many of them reported an abnormal exit of it within
/// ``exitWindow`` of that first event: the cells the guarded health test (``GuardedHealthTest``) reads.
public struct HealthCohort: Sendable, Hashable {
    public static let exitWindow: TimeInterval = 3 * 86_400
    static let exitWindowMicroseconds: Int64 = 3 * 86_400 * 1_000_000

    public var appId: AppID
    public var platform: Platform
    public var version: String
    public var osMajor: String
    public var day: UTCDay
}

/// Release health cohorts (docs/PROJECTIONS.md, "What the reports count"): each install's first event on
/// each version (its time and OS major) and its first abnormal exit of it (`health_versions`), and from
/// those the cohort cells the guarded health test reads (`health_cohorts`). A late event moves its install
/// between cells (−1/+1) whenever it arrives: no day closes for these.
public enum HealthCohortFold {
    public struct Output: Sendable {
        /// `health_versions` rows to write (inserted or changed).
        public var versions: [InstallVersionKey: InstallVersion] = [:]
        /// Non-zero changes to `health_cohorts`.
        public var cohorts: [HealthCohort: HealthCounts] = [:]
        /// Sort keys of the versions in `cohorts`.
        public var versionSortKeys: [String: String] = [:]
        public var deadLetters: [DeadLetter] = []
    }

    /// The `health_versions` rows the fold of `events` needs to read.
    public static func versionKeys(for events: [ProjectionEvent]) -> Set<InstallVersionKey> {
        var keys = Set<InstallVersionKey>()
        var versions = VersionCache()
        for event in events {
            guard let facts = try? event.installFacts(&versions) else { continue }
            keys.insert(InstallVersionKey(
                appId: event.appId, platform: facts.platform, installId: facts.install, version: facts.version.normalized))
        }
        return keys
    }

    /// Folds events given in feed order over the stored rows for `versionKeys(for: events)`.
    public static func fold(_ events: [ProjectionEvent], stored: [InstallVersionKey: InstallVersion]) -> Output {
        var output = Output()
        var versions = VersionCache()
        for event in events {
            let facts: (install: UUID, platform: Platform, version: ParsedVersion)
            do {
                guard let found = try event.installFacts(&versions) else { continue }
                facts = found
            } catch {
                output.deadLetters.append(DeadLetter(event: event, error: error.description))
                continue
            }
            output.versionSortKeys[facts.version.normalized] = facts.version.sortKey
            foldVersion(event, facts: facts, exit: event.type == EventType.abnormalExit.rawValue, stored: stored, into: &output)
        }
        output.cohorts = output.cohorts.filter { !$0.value.isZero }
        return output
    }

    /// The install's row of the version: the earliest event wins its time and OS major (ties: the
    /// earlier in the feed), the earliest abnormal exit its exit. Cohorts never close: a late event
    /// moves its install between cohort cells whenever it arrives.
    private static func foldVersion(
        _ event: ProjectionEvent, facts: (install: UUID, platform: Platform, version: ParsedVersion), exit: Bool,
        stored: [InstallVersionKey: InstallVersion], into output: inout Output
    ) {
        let key = InstallVersionKey(
            appId: event.appId, platform: facts.platform, installId: facts.install, version: facts.version.normalized)
        let zero = HealthCounts(installs: 0, exited: 0)
        guard let before = output.versions[key] ?? stored[key] else {
            let new = InstallVersion(
                versionSortKey: facts.version.sortKey, firstAt: event.occurredAt, osMajor: OSMajor.of(event.osVersion),
                exitAt: exit ? event.occurredAt : nil)
            let (cell, counts) = new.cohortCell(key)
            output.cohorts[cell, default: zero] += counts
            output.versions[key] = new
            return
        }
        var after = before
        if event.occurredAt < before.firstAt {
            after.firstAt = event.occurredAt
            after.osMajor = OSMajor.of(event.osVersion)
        }
        if exit, before.exitAt.map({ event.occurredAt < $0 }) ?? true { after.exitAt = event.occurredAt }
        guard after != before else { return }
        let (old, removed) = before.cohortCell(key)
        let (cell, added) = after.cohortCell(key)
        output.cohorts[old, default: zero] -= removed
        output.cohorts[cell, default: zero] += added
        output.versions[key] = after
    }
}
