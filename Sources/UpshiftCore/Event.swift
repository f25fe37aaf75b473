import Foundation

/// A validated event, ready to append to the event log (docs/ARCHITECTURE.md, "The event log").
///
/// The fixed columns are properties; everything else travels in `data`, a JSON object.
public struct Event: Sendable, Equatable {
    public var id: UUID
    public var type: EventType
    public var occurredAt: Date
    public var appId: AppID
    public var installId: UUID
    public var platform: Platform
    public var appVersion: String
    /// The remaining fields as a JSON object (`build`, `osVersion`, `locale` and the type's own fields).
    public var data: String

    public init(
        id: UUID, type: EventType, occurredAt: Date, appId: AppID, installId: UUID, platform: Platform,
        appVersion: String, data: String
    ) {
        self.id = id
        self.type = type
        self.occurredAt = occurredAt
        self.appId = appId
        self.installId = installId
        self.platform = platform
        self.appVersion = appVersion
        self.data = data
    }
}

/// Builds the `data` JSON object of an event from optional fields, in a fixed order, skipping nil ones.
public struct EventData {
    private var text = "{"

    public init() {}

    public mutating func add(_ key: String, _ value: String?) {
        guard let value else { return }
        separator()
        JSONText.appendQuoted(key, to: &text)
        text += ":"
        JSONText.appendQuoted(value, to: &text)
    }

    public mutating func add(_ key: String, _ value: Int?) {
        guard let value else { return }
        separator()
        JSONText.appendQuoted(key, to: &text)
        text += ":"
        text += String(value)
    }

    public var json: String { text + "}" }

    private mutating func separator() {
        if text.utf8.count > 1 { text += "," }
    }
}

/// What makes an event one event (docs/ARCHITECTURE.md, "One id, one event"): its app and its id.
public struct EventKey: Hashable, Sendable {
    public var appId: AppID
    public var id: UUID

    public init(appId: AppID, id: UUID) {
        self.appId = appId
        self.id = id
    }
}

extension Event {
    public var key: EventKey { EventKey(appId: appId, id: id) }

    /// The fields of `data`, in the order an `id_conflict` names the first that differs.
    static let dataFields = ["build", "osVersion", "locale", "promptKind", "targetVersion", "dismissAction", "fromVersion"]

    /// The first field, named as the API names it, in which `stored` (the event already stored under this
    /// event's app and id) differs from this one; nil when it is the same event, resent.
    public func firstDifference(from stored: Event) -> String? {
        if type != stored.type { return "type" }
        if occurredAt.microseconds != stored.occurredAt.microseconds { return "occurredAt" }
        if installId != stored.installId { return "installId" }
        if platform != stored.platform { return "platform" }
        if appVersion != stored.appVersion { return "appVersion" }
        let mine = (try? JSONValue.parse(Data(data.utf8)))?.objectValue ?? [:]
        let theirs = (try? JSONValue.parse(Data(stored.data.utf8)))?.objectValue ?? [:]
        for field in Self.dataFields where mine[field] != theirs[field] { return field }
        return nil
    }
}

/// The types of events only the server writes: a client that posts one is refused (`reserved_type`).
public enum ServerEventType: String, Sendable, CaseIterable {
    /// A check the server answered, with the install that asked.
    case checked
    /// An install's events were erased (docs/OPERATIONS.md, "Erasure of an install"): a mark in the log that holds no
    /// identifier of the install, only the erasure's id.
    case installForgotten = "install_forgotten"
}
