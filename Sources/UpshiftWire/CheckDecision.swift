import Foundation

/// What an app asks on launch (docs/ARCHITECTURE.md, "Parse").
public struct CheckRequest: Sendable, Equatable {
    public var platform: Platform
    public var version: Version
    public var build: Int?
    public var os: Version?
    /// Lowercase canonical UUID text.
    public var install: String?
    public var locale: String?
    public var channel: Channel
    public var previous: Version?

    public init(
        platform: Platform, version: Version, build: Int? = nil, os: Version? = nil, install: String? = nil,
        locale: String? = nil, channel: Channel = .live, previous: Version? = nil
    ) {
        self.platform = platform
        self.version = version
        self.build = build
        self.os = os
        self.install = install?.lowercased()
        self.locale = locale
        self.channel = channel
        self.previous = previous
    }
}

public enum CheckAction: String, Sendable, Codable, CaseIterable {
    case none, soft, force
}

/// Why the check answered as it did (docs/ARCHITECTURE.md, "The decision rules").
public enum CheckReason: String, Sendable, Codable, CaseIterable {
    case disabled
    case belowMinimum = "below_minimum"
    case blockedVersion = "blocked_version"
    case releaseOverdue = "release_overdue"
    case updateAvailable = "update_available"
    case notInRollout = "not_in_rollout"
    case osUnsupported = "os_unsupported"
    case tooRecent = "too_recent"
    case upToDate = "up_to_date"
    case notEnoughVersionsBehind = "not_enough_versions_behind"
}

/// Release notes of one version, in the requested locale.
public struct VersionNotes: Sendable, Equatable, Codable {
    public var version: String
    public var notes: [String]

    public init(version: String, notes: [String]) {
        self.version = version
        self.notes = notes
    }
}

/// The newest release the device's OS cannot run, so that the app can warn.
public struct Unsupported: Sendable, Equatable, Codable {
    public var latestVersion: String
    public var minimumOSVersion: String?
    public var maximumOSVersion: String?

    public init(latestVersion: String, minimumOSVersion: String? = nil, maximumOSVersion: String? = nil) {
        self.latestVersion = latestVersion
        self.minimumOSVersion = minimumOSVersion
        self.maximumOSVersion = maximumOSVersion
    }
}

/// The check response (docs/openapi.yaml, schema "CheckDecision").
public struct CheckDecision: Sendable, Equatable, Codable {
    public var action: CheckAction
    public var reason: CheckReason
    public var installedVersion: String
    public var latestVersion: String?
    public var minimumVersion: String?
    public var updateURL: String?
    public var releasedAt: Date?
    public var versionsBehind: Int?
    public var updateType: UpdateType?
    public var allowSkip: Bool?
    public var remindAfterSeconds: Int?
    public var checkAfterSeconds: Int
    public var releaseNotes: [VersionNotes]?
    public var whatsNew: [VersionNotes]?
    public var unsupported: Unsupported?
    /// 0–5, as Play's in-app update priority: the highest among the releases offered past the installed
    /// one, 5 for a force. Present when `action` is not `none`.
    public var priority: Int?
    /// Whole days since the offered version became offerable to this install; present when `action` is
    /// not `none`, `null` without `install`.
    public var stalenessDays: Int?

    public init(action: CheckAction, reason: CheckReason, installedVersion: String, checkAfterSeconds: Int) {
        self.action = action
        self.reason = reason
        self.installedVersion = installedVersion
        self.checkAfterSeconds = checkAfterSeconds
    }

    enum CodingKeys: String, CodingKey {
        case action, reason, installedVersion, latestVersion, minimumVersion, updateURL, releasedAt, versionsBehind
        case updateType, allowSkip, remindAfterSeconds, checkAfterSeconds, releaseNotes, whatsNew, unsupported
        case priority, stalenessDays
    }

    /// `latestVersion`, `updateURL`, `releasedAt` and `updateType` are always present, `null` when there is
    /// nothing to offer (a store URL may be unset; a pre-release to its release has no update type); the
    /// other optional fields appear only when they apply: `priority` and `stalenessDays` (`null` without an
    /// install) when `action` is not `none`.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(action, forKey: .action)
        try container.encode(reason, forKey: .reason)
        try container.encode(installedVersion, forKey: .installedVersion)
        try container.encode(latestVersion, forKey: .latestVersion)
        try container.encodeIfPresent(minimumVersion, forKey: .minimumVersion)
        try container.encode(updateURL, forKey: .updateURL)
        try container.encode(releasedAt, forKey: .releasedAt)
        try container.encodeIfPresent(versionsBehind, forKey: .versionsBehind)
        try container.encode(updateType, forKey: .updateType)
        try container.encodeIfPresent(allowSkip, forKey: .allowSkip)
        try container.encodeIfPresent(remindAfterSeconds, forKey: .remindAfterSeconds)
        try container.encode(checkAfterSeconds, forKey: .checkAfterSeconds)
        try container.encodeIfPresent(releaseNotes, forKey: .releaseNotes)
        try container.encodeIfPresent(whatsNew, forKey: .whatsNew)
        try container.encodeIfPresent(unsupported, forKey: .unsupported)
        if action != .none {
            try container.encodeIfPresent(priority, forKey: .priority)
            try container.encode(stalenessDays, forKey: .stalenessDays)
        }
    }
}
