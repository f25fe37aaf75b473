import UpshiftWire

/// What happened in the app that Upshift counts (docs/SDK.md, "Events"). `checked` is the server's own.
public enum UpshiftEvent: Sendable, Equatable {
    case launched
    case promptShown(kind: PromptKind, targetVersion: String)
    case promptDismissed(kind: PromptKind, targetVersion: String, action: DismissAction)
    case updateStarted(kind: PromptKind, targetVersion: String)
    case updated(fromVersion: String)
    case blocked(targetVersion: String)
    case whatsNewShown

    var type: EventType {
        switch self {
        case .launched: .launched
        case .promptShown: .promptShown
        case .promptDismissed: .promptDismissed
        case .updateStarted: .updateStarted
        case .updated: .updated
        case .blocked: .blocked
        case .whatsNewShown: .whatsNewShown
        }
    }

    var fields: [String: String] {
        switch self {
        case .launched, .whatsNewShown: [:]
        case .promptShown(let kind, let target), .updateStarted(let kind, let target):
            ["promptKind": kind.rawValue, "targetVersion": target]
        case .promptDismissed(let kind, let target, let action):
            ["promptKind": kind.rawValue, "targetVersion": target, "dismissAction": action.rawValue]
        case .updated(let from): ["fromVersion": from]
        case .blocked(let target): ["targetVersion": target]
        }
    }
}
