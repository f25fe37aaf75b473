import Foundation

/// An install of an app, for `install_state` and the per-install tables keyed the same way.
public struct InstallKey: Sendable, Hashable {
    public var appId: AppID
    public var installId: UUID

    public init(appId: AppID, installId: UUID) {
        self.appId = appId
        self.installId = installId
    }
}

/// One row of `install_state` (docs/PROJECTIONS.md, "What the reports count"): first and last seen, and
/// the platform, version, OS and locale of the event with the latest `occurredAt` (ties: the later in the
/// feed).
public struct InstallStateRow: Sendable, Equatable {
    public var key: InstallKey
    public var platform: Platform
    public var firstSeen: Date
    public var lastSeen: Date
    /// Report spelling (`Version.normalized`).
    public var version: String
    public var versionSortKey: String
    public var osVersion: String?
    public var locale: String?
    /// The `occurredAt` and channel of the install's latest `checked` event (ties: the later in the feed);
    /// nil while it never checked.
    public var checkedAt: Date?
    public var channel: String?
}

/// An install on one platform: what the time-to-update and prompt projections refresh after a batch.
public struct PlatformInstall: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var installId: UUID
}

/// When an install was first seen on a version (the `cohort_versions` and `prompt_versions` tables):
/// what time-to-update and the prompt funnel's conversion read.
public struct InstallVersionKey: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    public var installId: UUID
    public var version: String

    public init(appId: AppID, platform: Platform, installId: UUID, version: String) {
        self.appId = appId
        self.platform = platform
        self.installId = installId
        self.version = version
    }

    public var install: PlatformInstall { PlatformInstall(appId: appId, platform: platform, installId: installId) }
}

public struct InstallVersionRow: Sendable, Equatable {
    public var key: InstallVersionKey
    public var versionSortKey: String
    public var firstAt: Date
}

/// The first time each install was seen on each version, collapsed to one row per key within a batch
/// (earliest wins, so order and batching do not matter); the database keeps the earlier of that and
/// what it holds.
public struct FirstSeenVersions: Sendable {
    public private(set) var rows: [InstallVersionKey: InstallVersionRow] = [:]

    public init() {}

    public mutating func record(_ event: ProjectionEvent, install: UUID, platform: Platform, version: ParsedVersion) {
        let key = InstallVersionKey(appId: event.appId, platform: platform, installId: install, version: version.normalized)
        if let existing = rows[key], existing.firstAt <= event.occurredAt { return }
        rows[key] = InstallVersionRow(key: key, versionSortKey: version.sortKey, firstAt: event.occurredAt)
    }

    /// The installs whose versions this batch saw: their derived figures are refreshed.
    public var installs: Set<PlatformInstall> { Set(rows.keys.map(\.install)) }
}

/// The `install_state` projection's fold. Its rows merge by order-free rules (latest wins, earliest
/// wins), so a batch collapses to one row per install and the database merges it with what is stored.
public enum InstallStateFold {
    public struct Output: Sendable {
        public var states: [InstallStateRow] = []
        public var deadLetters: [DeadLetter] = []
    }

    /// Folds events given in feed order.
    public static func fold(_ events: [ProjectionEvent]) -> Output {
        var states: [InstallKey: InstallStateRow] = [:]
        var output = Output()
        var parsed = VersionCache()
        for event in events {
            let facts: (install: UUID, platform: Platform, version: ParsedVersion)
            do {
                guard let found = try event.installFacts(&parsed) else { continue }
                facts = found
            } catch {
                output.deadLetters.append(DeadLetter(event: event, error: error.description))
                continue
            }
            let name = facts.version.normalized
            let key = InstallKey(appId: event.appId, installId: facts.install)
            var row =
                states[key]
                ?? InstallStateRow(
                    key: key, platform: facts.platform, firstSeen: event.occurredAt, lastSeen: event.occurredAt,
                    version: name, versionSortKey: facts.version.sortKey, osVersion: event.osVersion, locale: event.locale)
            row.firstSeen = min(row.firstSeen, event.occurredAt)
            if event.occurredAt >= row.lastSeen {  // ties go to the later event in the feed: this one
                row.lastSeen = event.occurredAt
                row.platform = facts.platform
                row.version = name
                row.versionSortKey = facts.version.sortKey
                row.osVersion = event.osVersion
                row.locale = event.locale
            }
            if event.type == EventType.checked.rawValue, row.checkedAt.map({ event.occurredAt >= $0 }) ?? true {
                row.checkedAt = event.occurredAt
                row.channel = event.channel ?? Channel.live.rawValue
            }
            states[key] = row
        }
        output.states = Array(states.values)
        return output
    }
}
