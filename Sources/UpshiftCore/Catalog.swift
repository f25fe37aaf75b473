import Foundation

/// Whether a release is offered at all.
public enum ReleaseStatus: String, Sendable, Codable, CaseIterable {
    case live, withdrawn
}

/// An app of the catalog (docs/ARCHITECTURE.md, "What the catalog holds").
public struct AppInfo: Sendable, Equatable, Codable {
    public var id: AppID
    public var name: String
    public var defaultLocale: String
    /// Store URL per platform; a platform without one answers `updateURL: null`.
    public var updateURL: [Platform: String]
    public var storeId: [Platform: String]
    /// Bundle or package id per platform, as the iTunes lookup answers it (`bundleId`).
    public var bundleId: [Platform: String]
    /// 1 at creation, one more with each edit (`ETag: "n"`).
    public var revision: Int

    public init(
        id: AppID, name: String, defaultLocale: String = "en", updateURL: [Platform: String] = [:],
        storeId: [Platform: String] = [:], bundleId: [Platform: String] = [:], revision: Int = 1
    ) {
        self.id = id
        self.name = name
        self.defaultLocale = defaultLocale
        self.updateURL = updateURL
        self.storeId = storeId
        self.bundleId = bundleId
        self.revision = revision
    }

    enum CodingKeys: String, CodingKey {
        case id, name, defaultLocale, updateURL, storeId, bundleId, revision
    }

    /// Apps recorded before `bundleId` existed have none; before revisions, an app reads as revision 1.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(AppID.self, forKey: .id)
        name = try container.decode(String.self, forKey: .name)
        defaultLocale = try container.decode(String.self, forKey: .defaultLocale)
        updateURL = try container.decode([Platform: String].self, forKey: .updateURL)
        storeId = try container.decode([Platform: String].self, forKey: .storeId)
        bundleId = try container.decodeIfPresent([Platform: String].self, forKey: .bundleId) ?? [:]
        revision = try container.decodeIfPresent(Int.self, forKey: .revision) ?? 1
    }

    /// What an operator must hear when this edit of the app (`old` → self) takes a page away: releases
    /// of that platform without a `downloadURL` or an `updateURL` of their own (``Appcast/items(_:)``)
    /// leave the appcast, and their check answers carry no `updateURL`. On macOS a page that is not
    /// http(s) counts as none, since Sparkle refuses an item whose only link is not.
    public func pageWarnings(from old: AppInfo, releases: [Release]) -> [String] {
        func leads(_ page: String?, platform: Platform) -> Bool {
            guard let page else { return false }
            return platform != "macos" || CatalogInput.isDownloadURL(page)
        }
        return old.updateURL.keys.sorted().compactMap { platform in
            guard leads(old.updateURL[platform], platform: platform), !leads(updateURL[platform], platform: platform)
            else { return nil }
            let linkOnly = releases.filter { $0.platform == platform && $0.downloadURL == nil && $0.updateURL == nil }
                .sorted { $0.version > $1.version }
            let named = linkOnly.prefix(5).map(\.version.text).joined(separator: ", ")
                + (linkOnly.count > 5 ? " and \(linkOnly.count - 5) more" : "")
            let subject = updateURL[platform] == nil
                ? "\(platform) has no updateURL now" : "\(platform)'s updateURL is no http(s) page Sparkle can open"
            return linkOnly.isEmpty
                ? "\(subject): releases without a downloadURL or updateURL of their own will leave the feeds"
                : "\(subject): \(named) (without a downloadURL or updateURL of their own) leave the feeds"
        }
    }
}

/// A release of an app on one platform (docs/ARCHITECTURE.md, "What the catalog holds").
public struct Release: Sendable, Equatable, Codable {
    public var platform: Platform
    public var version: Version
    public var build: Int?
    /// May be in the future: then it is not offered yet.
    public var releasedAt: Date
    public var channel: Channel
    public var minimumOSVersion: Version?
    public var maximumOSVersion: Version?
    /// Locale → lines, as written by the team.
    public var notes: [String: [String]]
    /// Overrides the app's store URL for this release (enterprise downloads, TestFlight …).
    public var updateURL: String?
    /// The file an appcast's `enclosure` points at (absolute http(s)), its size in bytes and its EdDSA
    /// signature (base64 of 64 bytes): Sparkle downloads and verifies it.
    public var downloadURL: String?
    public var downloadLength: Int?
    public var edSignature: String?
    public var status: ReleaseStatus
    /// 0–100; a release admits an install when its bucket is below `rolloutPercent × 100`.
    public var rolloutPercent: Double
    /// A halted rollout: offered to nobody until resumed.
    public var rolloutPaused: Bool
    /// Each rise of the share of installs the rollout admits, oldest first (kept by the catalog store,
    /// never written by clients); nil for releases written before it was kept.
    public var rolloutHistory: [RolloutStep]?
    /// A staged rollout that advances by itself (nil: none, or it ended).
    public var rolloutSchedule: RolloutSchedule?
    /// 0–5, as Play's in-app update priority: how urgent the update is (the check's `priority`).
    public var priority: Int?
    /// 0 = never written; each change adds one (`ETag: "n"`).
    public var revision: Int

    public init(
        platform: Platform, version: Version, build: Int? = nil, releasedAt: Date, channel: Channel = .live,
        minimumOSVersion: Version? = nil, maximumOSVersion: Version? = nil, notes: [String: [String]] = [:],
        updateURL: String? = nil, downloadURL: String? = nil, downloadLength: Int? = nil, edSignature: String? = nil,
        status: ReleaseStatus = .live, rolloutPercent: Double = 100, rolloutPaused: Bool = false,
        rolloutHistory: [RolloutStep]? = nil, rolloutSchedule: RolloutSchedule? = nil, priority: Int? = nil,
        revision: Int = 0
    ) {
        self.platform = platform
        self.version = version
        self.build = build
        self.releasedAt = releasedAt
        self.channel = channel
        self.minimumOSVersion = minimumOSVersion
        self.maximumOSVersion = maximumOSVersion
        self.notes = notes
        self.updateURL = updateURL
        self.downloadURL = downloadURL
        self.downloadLength = downloadLength
        self.edSignature = edSignature
        self.status = status
        self.rolloutPercent = rolloutPercent
        self.rolloutPaused = rolloutPaused
        self.rolloutHistory = rolloutHistory
        self.rolloutSchedule = rolloutSchedule
        self.priority = priority
        self.revision = revision
    }
}

/// The update policy of an app on one platform (docs/ARCHITECTURE.md, "What the catalog holds"). Every
/// field is optional but `enabled`; a policy never set is `{"enabled": true}` at revision 0.
public struct Policy: Sendable, Equatable, Codable {
    public var enabled: Bool
    public var minimumVersion: Version?
    public var targetVersion: Version?
    public var blockedVersions: [Version]
    /// X: days after release before a soft prompt.
    public var notifyAfterDays: Double?
    /// Y: days after release before an offered release becomes a force.
    public var blockAfterDays: Double?
    /// Z: versions behind before a soft prompt.
    public var versionsBehindThreshold: Int
    public var remindIntervalSeconds: Int
    public var checkIntervalSeconds: Int
    public var allowSkip: Bool
    public var revision: Int

    public static let defaultVersionsBehindThreshold = 1
    public static let defaultRemindIntervalSeconds = 86_400
    public static let defaultCheckIntervalSeconds = 86_400

    public init(
        enabled: Bool = true, minimumVersion: Version? = nil, targetVersion: Version? = nil,
        blockedVersions: [Version] = [], notifyAfterDays: Double? = nil, blockAfterDays: Double? = nil,
        versionsBehindThreshold: Int = Policy.defaultVersionsBehindThreshold,
        remindIntervalSeconds: Int = Policy.defaultRemindIntervalSeconds,
        checkIntervalSeconds: Int = Policy.defaultCheckIntervalSeconds, allowSkip: Bool = true, revision: Int = 0
    ) {
        self.enabled = enabled
        self.minimumVersion = minimumVersion
        self.targetVersion = targetVersion
        self.blockedVersions = blockedVersions
        self.notifyAfterDays = notifyAfterDays
        self.blockAfterDays = blockAfterDays
        self.versionsBehindThreshold = versionsBehindThreshold
        self.remindIntervalSeconds = remindIntervalSeconds
        self.checkIntervalSeconds = checkIntervalSeconds
        self.allowSkip = allowSkip
        self.revision = revision
    }

    enum CodingKeys: String, CodingKey {
        case enabled, minimumVersion, targetVersion, blockedVersions, notifyAfterDays, blockAfterDays
        case versionsBehindThreshold, remindIntervalSeconds, checkIntervalSeconds, allowSkip, revision
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        enabled = try container.decode(Bool.self, forKey: .enabled)
        minimumVersion = try container.decodeIfPresent(Version.self, forKey: .minimumVersion)
        targetVersion = try container.decodeIfPresent(Version.self, forKey: .targetVersion)
        blockedVersions = try container.decodeIfPresent([Version].self, forKey: .blockedVersions) ?? []
        notifyAfterDays = try container.decodeIfPresent(Double.self, forKey: .notifyAfterDays)
        blockAfterDays = try container.decodeIfPresent(Double.self, forKey: .blockAfterDays)
        versionsBehindThreshold =
            try container.decodeIfPresent(Int.self, forKey: .versionsBehindThreshold) ?? Self.defaultVersionsBehindThreshold
        remindIntervalSeconds =
            try container.decodeIfPresent(Int.self, forKey: .remindIntervalSeconds) ?? Self.defaultRemindIntervalSeconds
        checkIntervalSeconds =
            try container.decodeIfPresent(Int.self, forKey: .checkIntervalSeconds) ?? Self.defaultCheckIntervalSeconds
        allowSkip = try container.decodeIfPresent(Bool.self, forKey: .allowSkip) ?? true
        revision = try container.decodeIfPresent(Int.self, forKey: .revision) ?? 0
    }

    public func isBlocked(_ version: Version) -> Bool {
        blockedVersions.contains(version)
    }

    /// What an operator must hear about this policy among the platform's `releases`: a minimum above
    /// every live release blocks installs that have nothing to update to.
    public func warnings(among releases: [Release], platform: Platform) -> [String] {
        guard let minimum = minimumVersion, !releases.contains(where: { $0.status == .live && $0.version >= minimum })
        else { return [] }
        return ["minimumVersion \(minimum) is above every live release on \(platform): installs below it cannot update"]
    }
}

/// Everything the check needs to know about one app: the catalog snapshot entry.
public struct AppCatalog: Sendable, Equatable {
    public var app: AppInfo
    /// Releases per platform, newest first.
    public private(set) var releases: [Platform: [Release]]
    public var policies: [Platform: Policy]
    /// Rules per platform, by id.
    public private(set) var rules: [Platform: [Rule]]

    public init(app: AppInfo, releases: [Release] = [], policies: [Platform: Policy] = [:], rules: [Rule] = []) {
        self.app = app
        self.releases = [:]
        self.policies = policies
        self.rules = [:]
        for release in releases { upsert(release) }
        for rule in rules { upsert(rule) }
    }

    public func rules(for platform: Platform) -> [Rule] {
        rules[platform] ?? []
    }

    /// Adds or replaces (by id) a rule, keeping them sorted by id.
    public mutating func upsert(_ rule: Rule) {
        var list = rules[rule.platform] ?? []
        list.removeAll { $0.id == rule.id }
        list.insert(rule, at: list.firstIndex { $0.id > rule.id } ?? list.endIndex)
        rules[rule.platform] = list
    }

    public mutating func removeRule(platform: Platform, id: String) {
        rules[platform]?.removeAll { $0.id == id }
        if rules[platform]?.isEmpty == true { rules[platform] = nil }
    }

    public func policy(for platform: Platform) -> Policy {
        policies[platform] ?? Policy()
    }

    /// The platforms with a release or a policy, sorted.
    public var platforms: [Platform] { Set(releases.keys).union(policies.keys).sorted() }

    public func releases(for platform: Platform) -> [Release] {
        releases[platform] ?? []
    }

    public func release(platform: Platform, version: Version) -> Release? {
        releases[platform]?.first { $0.version == version }
    }

    /// Adds or replaces (by version equality) a release, keeping newest first.
    public mutating func upsert(_ release: Release) {
        var list = releases[release.platform] ?? []
        list.removeAll { $0.version == release.version }
        let index = list.firstIndex { $0.version < release.version } ?? list.endIndex
        list.insert(release, at: index)
        releases[release.platform] = list
    }
}
