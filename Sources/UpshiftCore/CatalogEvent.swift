import Foundation

/// A change to the catalog, as recorded on stream `app:{id}` (docs/ARCHITECTURE.md, "The catalog can be
/// rebuilt from the events"). Each carries the whole value after the change, so that the catalog can be
/// rebuilt from the events alone, plus who made it, why, and what changed.
public struct CatalogEvent: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        case appCreated = "app_created"
        case appUpdated = "app_updated"
        case releaseAdded = "release_added"
        case releaseUpdated = "release_updated"
        case policyReplaced = "policy_replaced"
        /// A rule written (created or changed); the event carries it whole.
        case ruleReplaced = "rule_replaced"
        /// A rule removed; the event carries it as it was.
        case ruleRemoved = "rule_removed"
    }

    /// A field's value before and after (absent when unset).
    public struct FieldChange: Sendable, Equatable, Codable {
        public var from: JSONValue?
        public var to: JSONValue?
    }

    public var kind: Kind
    /// The name of the token (or CLI user) that made the change.
    public var actor: String
    public var reason: String?
    public var app: AppInfo?
    public var release: Release?
    public var platform: Platform?
    public var policy: Policy?
    public var rule: Rule?
    public var changes: [String: FieldChange]
    /// The rollout worker's step, on its writes.
    public var schedule: ScheduleNote?

    enum CodingKeys: String, CodingKey {
        case actor, reason, app, release, platform, policy, rule, changes, schedule
    }

    public init(kind: Kind, actor: String, reason: String?, app: AppInfo? = nil, release: Release? = nil,
                platform: Platform? = nil, policy: Policy? = nil, rule: Rule? = nil, changes: [String: FieldChange] = [:],
                schedule: ScheduleNote? = nil) {
        self.kind = kind
        self.actor = actor
        self.reason = reason
        self.app = app
        self.release = release
        self.platform = platform
        self.policy = policy
        self.rule = rule
        self.changes = changes
        self.schedule = schedule
    }

    /// Decodes the `data` of an event of type `kind`.
    public static func decode(kind: Kind, data: Data) throws -> CatalogEvent {
        var event = try CatalogCoding.decoder().decode(CatalogEvent.self, from: data)
        event.kind = kind
        return event
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        kind = .appCreated  // set by decode(kind:data:) from the event's type
        actor = try container.decode(String.self, forKey: .actor)
        reason = try container.decodeIfPresent(String.self, forKey: .reason)
        app = try container.decodeIfPresent(AppInfo.self, forKey: .app)
        release = try container.decodeIfPresent(Release.self, forKey: .release)
        platform = try container.decodeIfPresent(Platform.self, forKey: .platform)
        policy = try container.decodeIfPresent(Policy.self, forKey: .policy)
        rule = try container.decodeIfPresent(Rule.self, forKey: .rule)
        changes = try container.decodeIfPresent([String: FieldChange].self, forKey: .changes) ?? [:]
        schedule = try container.decodeIfPresent(ScheduleNote.self, forKey: .schedule)
    }

    /// Field-by-field differences between two values' JSON (top-level keys).
    public static func changes(from old: (some Encodable)?, to new: some Encodable) throws -> [String: FieldChange] {
        let encoder = CatalogCoding.encoder()
        let before = try old.map { try JSONValue.parse(try encoder.encode($0)).objectValue ?? [:] } ?? [:]
        let after = try JSONValue.parse(try encoder.encode(new)).objectValue ?? [:]
        var changes: [String: FieldChange] = [:]
        for key in Set(before.keys).union(after.keys) where key != "revision" && before[key] != after[key] {
            changes[key] = FieldChange(from: before[key], to: after[key])
        }
        return changes
    }

    /// Applies this event to the catalog of its app (the fold that rebuilds the catalog from the log).
    public func apply(to catalog: inout AppCatalog?) {
        switch kind {
        case .appCreated:
            if let app { catalog = AppCatalog(app: app) }
        case .appUpdated:
            if let app { catalog?.app = app }
        case .releaseAdded, .releaseUpdated:
            if let release { catalog?.upsert(release) }
        case .policyReplaced:
            if let platform, let policy { catalog?.policies[platform] = policy }
        case .ruleReplaced:
            if let rule { catalog?.upsert(rule) }
        case .ruleRemoved:
            if let rule { catalog?.removeRule(platform: rule.platform, id: rule.id) }
        }
    }
}
