import UpshiftWire

/// What the app should show now: the server's decision with the device's own rules applied.
public struct UpshiftDecision: Sendable, Equatable {
    public enum Origin: Sendable, Equatable {
        /// Asked the server just now.
        case server
        /// The decision stored for this app version and build: not due yet, or the server did not answer in time.
        case stored
        /// No answer and nothing stored for this version: show nothing.
        case none
    }

    public enum Suppression: Sendable, Equatable {
        /// The user chose "later" less than `remindAfterSeconds` ago.
        case remindLater
        /// The user chose to skip this version.
        case skipped
    }

    /// `none`, `soft` or `force`, after the reminder and skip rules (which never hold back a force).
    public var action: CheckAction
    public var origin: Origin
    public var suppressedBy: Suppression?
    /// The server's answer this is based on; nil with origin `none`.
    public var server: CheckDecision?

    public init(action: CheckAction, origin: Origin, suppressedBy: Suppression? = nil, server: CheckDecision? = nil) {
        self.action = action
        self.origin = origin
        self.suppressedBy = suppressedBy
        self.server = server
    }

    public var latestVersion: String? { server?.latestVersion }
    public var updateURL: String? { server?.updateURL }
    public var releaseNotes: [VersionNotes] { server?.releaseNotes ?? [] }
    /// 0–5, how urgent the team marked the update (as Play's in-app update priority); 5 for a force. Nil
    /// when the server offers nothing.
    public var priority: Int? { server?.priority }
    /// Whole days since the offered version became available to this install, as of the server's answer
    /// (a stored decision is as old as that answer). Nil when the server offers nothing.
    public var stalenessDays: Int? { server?.stalenessDays }
}


/// Decisions and notes for SwiftUI previews and tests of an app's update screens (nothing is asked).
extension UpshiftDecision {
    /// A soft prompt to 2.0 from 1.0, with notes, that the user may skip.
    public static let previewSoft = UpshiftDecision(
        action: .soft, origin: .server,
        server: .preview(action: .soft, reason: .updateAvailable, notes: VersionNotes.previewNotes))
    /// A blocking screen: 1.0 is below the minimum 2.0.
    public static let previewForce = UpshiftDecision(
        action: .force, origin: .server, server: .preview(action: .force, reason: .belowMinimum, notes: []))
    /// Nothing to show.
    public static let previewNone = UpshiftDecision(action: .none, origin: .none)
}

extension VersionNotes {
    /// What's New of two releases.
    public static let previewNotes = [
        VersionNotes(version: "1.1", notes: ["Receipts scan twice as fast."]),
        VersionNotes(version: "2.0", notes: ["Shared budgets.", "A new look for the home screen."]),
    ]
}

extension CheckDecision {
    static func preview(action: CheckAction, reason: CheckReason, notes: [VersionNotes]) -> CheckDecision {
        var decision = CheckDecision(action: action, reason: reason, installedVersion: "1.0", checkAfterSeconds: 3600)
        decision.latestVersion = "2.0"
        decision.updateURL = "https://apps.apple.com/app/id1234567890"
        decision.minimumVersion = action == .force ? "2.0" : nil
        decision.updateType = .major
        decision.allowSkip = action == .soft
        decision.remindAfterSeconds = 86_400
        decision.releaseNotes = notes
        return decision
    }
}
