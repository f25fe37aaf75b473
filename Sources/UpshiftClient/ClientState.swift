import Foundation
import UpshiftWire

/// What the SDK remembers across launches, in `state.json` of the storage directory. Every field decodes
/// with a default, so a file written by an older or newer SDK loads (`schemaVersion` says which wrote it).
struct ClientState: Codable, Sendable, Equatable {
    /// 3: the crash-loop marker names the app version and build; dropped events are counted in the queue file.
    /// 4: the open foreground session.
    static let schemaVersion = 4

    struct StoredDecision: Codable, Sendable, Equatable {
        /// The app version and build the decision was made for: it is never used for another.
        var appVersion: String
        var build: Int?
        var decision: CheckDecision
        var receivedAt: Date
    }

    /// A migration step started and not yet finished: found at launch, it was interrupted (a crash, a kill).
    /// Its attempts count for the app version and build that made them: a new one tries the step again.
    struct StepUnderWay: Codable, Sendable, Equatable {
        var version: String
        var attempts: Int
        var appVersion: String?
        var build: Int?
    }

    /// A session in the foreground, opened when the app is in the foreground and the SDK follows its
    /// lifecycle, closed when the app goes to the background. Found open by the next process, it ended
    /// without the app saying so: `abnormal_exit`.
    struct Session: Codable, Sendable, Equatable {
        var appVersion: String
        var build: Int?
        var since: Date
    }

    var schemaVersion = ClientState.schemaVersion
    /// The version (and build) of the last launch: a different one is an update.
    var launchedVersion: String?
    var launchedBuild: Int?
    /// The version before the last update, sent as `previous` until a check answered with What's New.
    var previousVersion: String?
    var whatsNew: [VersionNotes]?
    var decision: StoredDecision?
    /// No soft prompt before this time (the user chose "later").
    var remindAfter: Date?
    /// Versions the user chose to skip (normalized spelling).
    var skippedVersions: Set<String> = []
    /// The version of the last migration step that completed; nil while the data's version is unknown.
    var migratedThrough: String?
    var stepUnderWay: StepUnderWay?
    var session: Session?
    /// Events dropped from a full queue as SDK versions that counted them here did (moved to the queue file).
    var legacyEvictedEvents = 0
    /// The user opted out: nothing is recorded, checks carry no install id.
    var optedOut = false
    /// The install id of SDK versions that kept it here (moved to its own file on first load).
    var legacyInstallId: UUID?

    init() {}

    enum CodingKeys: String, CodingKey {
        case schemaVersion, launchedVersion, launchedBuild, previousVersion, whatsNew, decision, remindAfter
        case skippedVersions, migratedThrough, stepUnderWay, session, optedOut
        case legacyInstallId = "installId"
        case legacyEvictedEvents = "evictedEvents"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        schemaVersion = try container.decodeIfPresent(Int.self, forKey: .schemaVersion) ?? 1
        launchedVersion = try container.decodeIfPresent(String.self, forKey: .launchedVersion)
        launchedBuild = try container.decodeIfPresent(Int.self, forKey: .launchedBuild)
        previousVersion = try container.decodeIfPresent(String.self, forKey: .previousVersion)
        whatsNew = try container.decodeIfPresent([VersionNotes].self, forKey: .whatsNew)
        // A decision this SDK cannot read is only a stale answer: asked again.
        decision = try? container.decodeIfPresent(StoredDecision.self, forKey: .decision)
        remindAfter = try container.decodeIfPresent(Date.self, forKey: .remindAfter)
        skippedVersions = try container.decodeIfPresent(Set<String>.self, forKey: .skippedVersions) ?? []
        migratedThrough = try container.decodeIfPresent(String.self, forKey: .migratedThrough)
        stepUnderWay = try container.decodeIfPresent(StepUnderWay.self, forKey: .stepUnderWay)
        session = try container.decodeIfPresent(Session.self, forKey: .session)
        legacyEvictedEvents = try container.decodeIfPresent(Int.self, forKey: .legacyEvictedEvents) ?? 0
        optedOut = try container.decodeIfPresent(Bool.self, forKey: .optedOut) ?? false
        legacyInstallId = try container.decodeIfPresent(UUID.self, forKey: .legacyInstallId)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ClientState.schemaVersion, forKey: .schemaVersion)
        try container.encodeIfPresent(launchedVersion, forKey: .launchedVersion)
        try container.encodeIfPresent(launchedBuild, forKey: .launchedBuild)
        try container.encodeIfPresent(previousVersion, forKey: .previousVersion)
        try container.encodeIfPresent(whatsNew, forKey: .whatsNew)
        try container.encodeIfPresent(decision, forKey: .decision)
        try container.encodeIfPresent(remindAfter, forKey: .remindAfter)
        try container.encode(skippedVersions.sorted(), forKey: .skippedVersions)
        try container.encodeIfPresent(migratedThrough, forKey: .migratedThrough)
        try container.encodeIfPresent(stepUnderWay, forKey: .stepUnderWay)
        try container.encodeIfPresent(session, forKey: .session)
        try container.encode(optedOut, forKey: .optedOut)
    }
}

