/// The event types (docs/openapi.yaml, schema "EventType"; the fields of each: schema "Event").
public enum EventType: String, Sendable, CaseIterable, Codable {
    case launched
    case promptShown = "prompt_shown"
    case promptDismissed = "prompt_dismissed"
    case updateStarted = "update_started"
    case updated
    case blocked
    case whatsNewShown = "whats_new_shown"
    /// The previous session of `appVersion` ended without the app saying so (a crash, a kill in the
    /// foreground): reported once, at the next launch, by the SDK.
    case abnormalExit = "abnormal_exit"
    /// Written by the server for each check that carries an install id; clients may not post it.
    case checked

    /// Types a client may post to `POST /v1/events`.
    public static let clientTypes: [EventType] = allCases.filter { $0 != .checked }
}

/// The kind of update prompt an app showed.
public enum PromptKind: String, Sendable, Codable, CaseIterable {
    case soft, force
}

/// How the user closed a soft prompt.
public enum DismissAction: String, Sendable, Codable, CaseIterable {
    case later, skip
}
