import Foundation

/// A release as the time-to-update projection tracks it: app, platform, version and release time.
public struct TrackedRelease: Sendable, Hashable {
    public struct Key: Sendable, Hashable {
        public var appId: AppID
        public var platform: Platform
        /// Report spelling (`Version.normalized`).
        public var version: String

        public init(appId: AppID, platform: Platform, version: String) {
            self.appId = appId
            self.platform = platform
            self.version = version
        }
    }

    public var key: Key
    public var version: Version
    public var releasedAt: Date

    public init(appId: AppID, platform: Platform, version: Version, releasedAt: Date) {
        self.key = Key(appId: appId, platform: platform, version: version.normalized)
        self.version = version
        self.releasedAt = releasedAt
    }

    /// The cohort window [R − 7 days, R).
    public var windowStart: Date { releasedAt.addingTimeInterval(-ReleaseCohortFold.window) }

    /// Whether `date` falls in the window, compared in whole microseconds as the database does.
    public func windowContains(_ date: Date) -> Bool {
        let micros = date.microseconds
        let end = releasedAt.microseconds
        return micros >= end - Int64(ReleaseCohortFold.window) * 1_000_000 && micros < end
    }
}

/// An install of a release's cohort candidates.
public struct CohortMemberKey: Sendable, Hashable {
    public var release: TrackedRelease.Key
    public var installId: UUID

    public init(release: TrackedRelease.Key, installId: UUID) {
        self.release = release
        self.installId = installId
    }
}

/// The install's last event in [R − 7 days, R): when, and whether its version was below the release.
/// An install belongs to the cohort when that last event was below (docs/PROJECTIONS.md, "What the
/// reports count").
public struct CohortCandidate: Sendable, Equatable {
    public var lastBeforeAt: Date
    public var below: Bool

    public init(lastBeforeAt: Date, below: Bool) {
        self.lastBeforeAt = lastBeforeAt
        self.below = below
    }
}

/// The release cohorts projection's fold (time-to-update: docs/PROJECTIONS.md, "What the reports
/// count").
///
/// For every release it knows, it keeps each install's last event in the week before the release,
/// merged by "latest wins" so that late events correct it. When the fold first reads a release (or
/// its release time changes), the week before it may already be in the log: the batch ends at that
/// catalog event, and the store seeds the release from the events before it in the feed.
/// It also keeps when each install was first seen on each version (of every app, releases or not, so
/// that a release added later finds them): after each batch the store derives each touched cohort
/// install's T from them, and the per-release figures the report reads (``ReleaseProgress``).
public enum ReleaseCohortFold {
    public static let window: TimeInterval = 7 * 86_400

    /// A catalog event that may add a release or move its release time: a batch ends after one.
    public static func isBarrier(_ event: ProjectionEvent) -> Bool {
        event.installId == nil
            && (event.type == CatalogEvent.Kind.releaseAdded.rawValue
                || event.type == CatalogEvent.Kind.releaseUpdated.rawValue)
    }

    /// How many of `events` one batch takes: up to and including the first barrier.
    public static func batchLength(_ events: [ProjectionEvent]) -> Int {
        events.firstIndex(where: isBarrier).map { $0 + 1 } ?? events.count
    }

    /// The release a catalog event adds or changes.
    public static func release(in event: ProjectionEvent) throws(ProjectionError) -> TrackedRelease {
        guard let kind = CatalogEvent.Kind(rawValue: event.type), let text = event.catalogData else {
            throw ProjectionError("\(event.type) event has no data")
        }
        let decoded: CatalogEvent
        do {
            decoded = try CatalogEvent.decode(kind: kind, data: Data(text.utf8))
        } catch {
            throw ProjectionError("\(event.type) data cannot be read: \(error)")
        }
        guard let release = decoded.release else { throw ProjectionError("\(event.type) event has no release") }
        return TrackedRelease(
            appId: event.appId, platform: release.platform, version: release.version, releasedAt: release.releasedAt)
    }

    public struct Output: Sendable {
        public var candidates: [CohortMemberKey: CohortCandidate] = [:]
        public var versions = FirstSeenVersions()
        /// A release read for the first time or with a new release time: the store replaces its
        /// candidates with those seeded from the log before `event`.
        public var changedRelease: (release: TrackedRelease, event: ProjectionEvent)?
        public var deadLetters: [DeadLetter] = []
    }

    /// Folds events given in feed order, which end at the first barrier if they hold one.
    public static func fold(_ events: [ProjectionEvent], releases: [TrackedRelease.Key: TrackedRelease]) -> Output {
        var output = Output()
        var byApp: [AppID: [TrackedRelease]] = [:]
        for release in releases.values { byApp[release.key.appId, default: []].append(release) }
        var versions = VersionCache()
        for event in events {
            if isBarrier(event) {
                do {
                    let release = try release(in: event)
                    if releases[release.key]?.releasedAt.microseconds != release.releasedAt.microseconds {
                        output.changedRelease = (release, event)
                    }
                } catch {
                    output.deadLetters.append(DeadLetter(event: event, error: error.description))
                }
                break  // the batch ends here (`batchLength`)
            }
            let facts: (install: UUID, platform: Platform, version: ParsedVersion)
            do {
                guard let found = try event.installFacts(&versions) else { continue }
                facts = found
            } catch {
                // An app's events are read, and dead-lettered, from its first release on.
                if byApp[event.appId] != nil { output.deadLetters.append(DeadLetter(event: event, error: error.description)) }
                continue
            }
            output.versions.record(event, install: facts.install, platform: facts.platform, version: facts.version)
            guard let tracked = byApp[event.appId] else { continue }
            for release in tracked
            where release.key.platform == facts.platform && release.windowContains(event.occurredAt) {
                let key = CohortMemberKey(release: release.key, installId: facts.install)
                // Ties in occurredAt go to the later event in the feed: this one.
                if let current = output.candidates[key], current.lastBeforeAt > event.occurredAt { continue }
                output.candidates[key] = CohortCandidate(
                    lastBeforeAt: event.occurredAt, below: facts.version.value < release.version)
            }
        }
        return output
    }

    /// Candidates of `release` from the log before it was read: its window's events in feed order
    /// (`occurred_at`, `tx_id`, `position`), as (install, occurredAt, appVersion). Each install's last
    /// event with a valid version wins, as in `fold` (events without one are dead letters there).
    public static func seed(
        _ release: TrackedRelease, windowEvents: [(installId: UUID, occurredAt: Date, appVersion: String?)]
    ) -> [CohortMemberKey: CohortCandidate] {
        var candidates: [CohortMemberKey: CohortCandidate] = [:]
        for row in windowEvents {
            guard let text = row.appVersion, let version = Version(text), release.windowContains(row.occurredAt)
            else { continue }
            let key = CohortMemberKey(release: release.key, installId: row.installId)
            if let current = candidates[key], current.lastBeforeAt > row.occurredAt { continue }
            candidates[key] = CohortCandidate(lastBeforeAt: row.occurredAt, below: version < release.version)
        }
        return candidates
    }
}

/// How an install's T is derived and bucketed for the release report's read model (docs/PROJECTIONS.md,
/// "What the reports count"). The report reads, per release, the cohort size and the updated installs per
/// hour of T, and finds the median and p90 inside their hour; the store computes the same in SQL
/// (`ReleaseCohortsProjection`).
public enum ReleaseProgress {
    public static let hourMilliseconds: Int64 = 3_600_000

    /// T in milliseconds as the report states it: the microseconds since the release, rounded to the
    /// nearest millisecond (halves up), as PostgreSQL's `(extract(epoch FROM …) * 1000)::int8` does.
    public static func milliseconds(from releasedAt: Date, to reachedAt: Date) -> Int64 {
        let micros = reachedAt.microseconds - releasedAt.microseconds
        return micros >= 0 ? (micros + 500) / 1_000 : -((-micros + 499) / 1_000)
    }

    /// The hour of T a cohort install is counted in: ⌈T / 1 h⌉ (0 for T = 0). ⌈T / 1 day⌉ is then
    /// ⌈hour / 24⌉ exactly, so the days of the report follow from the hours.
    public static func hour(milliseconds: Int64) -> Int {
        Int((milliseconds + hourMilliseconds - 1) / hourMilliseconds)
    }

    public static func day(hour: Int) -> Int { (hour + 23) / 24 }

    /// The microseconds after the release that an hour of T covers: T rounds into the hour exactly when
    /// `lower ≤ reached − released < upper`.
    public static func microsecondRange(hour: Int) -> (lower: Int64, upper: Int64) {
        let top = Int64(hour) * hourMilliseconds
        return ((top - hourMilliseconds) * 1_000 + 500, top * 1_000 + 500)
    }
}
