import Foundation

/// An install's path through the prompts for one target version and prompt kind.
public struct FunnelKey: Sendable, Hashable {
    public var appId: AppID
    public var platform: Platform
    /// Report spelling of the target version (`Version.normalized`).
    public var targetVersion: String
    public var kind: PromptKind
    public var installId: UUID
}

/// What the install did: merged by "earliest" and "ever" rules, so order and batching do not matter.
public struct FunnelMarks: Sendable, Equatable {
    public var targetSortKey: String
    public var firstShownAt: Date?
    public var dismissedLater = false
    public var dismissedSkip = false
    public var updateStarted = false
    /// The first `update_started`: the install counts as updated after starting when it is seen on a
    /// version ≥ the target within 7 days of it.
    public var firstStartedAt: Date?
    /// When the server recorded the first `update_started` (by `recorded_at`): the start of the 24 hours
    /// within which an `updated` must be recorded, or the install counts as unfinished.
    public var firstStartedRecordedAt: Date?
    public var blocked = false
}

/// An `updated` event as the unfinished share reads it: which install reported running which version
/// (by sort key), recorded when. Equal rows are one: the share asks whether one exists in a window.
public struct RecordedUpdate: Sendable, Hashable {
    public var install: PlatformInstall
    public var versionSortKey: String
    public var recordedAt: Date
}

/// The prompt funnel projection's fold (docs/PROJECTIONS.md, "What the reports count"). Conversion (seen
/// on a version ≥ target within 7 days of the first `prompt_shown`) is derived by the store after each batch
/// from the first time each touched install was seen on each version, which the fold also keeps.
public enum PromptFunnelFold {
    public struct Output: Sendable {
        public var marks: [FunnelKey: FunnelMarks] = [:]
        /// When each install was first seen on each version (from every event of an install): what
        /// conversion reads.
        public var versions = FirstSeenVersions()
        /// Every `updated` event of the batch: what the unfinished share reads.
        public var updates: Set<RecordedUpdate> = []
        public var deadLetters: [DeadLetter] = []
    }

    public static func fold(_ events: [ProjectionEvent]) -> Output {
        var output = Output()
        var versions = VersionCache()
        for event in events {
            let type = EventType(rawValue: event.type)
            let prompt = type == .promptShown || type == .promptDismissed || type == .updateStarted || type == .blocked
            let facts: (install: UUID, platform: Platform, version: ParsedVersion)
            do {
                guard let found = try event.installFacts(&versions) else { continue }
                facts = found
            } catch {
                // Only the prompt events are this projection's to dead-letter.
                if prompt { output.deadLetters.append(DeadLetter(event: event, error: error.description)) }
                continue
            }
            output.versions.record(event, install: facts.install, platform: facts.platform, version: facts.version)
            if type == .updated {
                output.updates.insert(
                    RecordedUpdate(
                        install: PlatformInstall(appId: event.appId, platform: facts.platform, installId: facts.install),
                        versionSortKey: facts.version.sortKey, recordedAt: event.recordedAt))
            }
            guard prompt, let type else { continue }
            do throws(ProjectionError) {
                guard let text = event.targetVersion, let target = versions.parse(text) else {
                    throw ProjectionError("targetVersion \(event.targetVersion.map { "'\($0)'" } ?? "is missing") is not a version")
                }
                let kind: PromptKind
                if type == .blocked {
                    kind = .force
                } else if let text = event.promptKind, let parsed = PromptKind(rawValue: text) {
                    kind = parsed
                } else {
                    throw ProjectionError("promptKind \(event.promptKind.map { "'\($0)'" } ?? "is missing") is not soft or force")
                }
                let key = FunnelKey(
                    appId: event.appId, platform: facts.platform, targetVersion: target.normalized, kind: kind,
                    installId: facts.install)
                var marks = output.marks[key] ?? FunnelMarks(targetSortKey: target.sortKey)
                switch type {
                case .promptShown:
                    marks.firstShownAt = min(marks.firstShownAt ?? event.occurredAt, event.occurredAt)
                case .promptDismissed:
                    switch event.dismissAction.flatMap(DismissAction.init(rawValue:)) {
                    case .later: marks.dismissedLater = true
                    case .skip: marks.dismissedSkip = true
                    case nil:
                        throw ProjectionError("dismissAction \(event.dismissAction.map { "'\($0)'" } ?? "is missing") is not later or skip")
                    }
                case .updateStarted:
                    marks.updateStarted = true
                    marks.firstStartedAt = min(marks.firstStartedAt ?? event.occurredAt, event.occurredAt)
                    marks.firstStartedRecordedAt = min(marks.firstStartedRecordedAt ?? event.recordedAt, event.recordedAt)
                default: marks.blocked = true
                }
                output.marks[key] = marks
            } catch {
                output.deadLetters.append(DeadLetter(event: event, error: error.description))
            }
        }
        return output
    }
}
