import Foundation

/// A rule never undoes a person (docs/OPERATIONS.md, "Rules"): once a rule has set a field of a release or
/// policy, a later write of that field by anyone but a rule or the schedule stops the rule acting on it,
/// until the rule itself is written again.
public enum RuleOverride {
    public struct Write: Sendable, Equatable {
        public var at: Date
        public var actor: String
        public var fields: Set<String>

        public init(at: Date, actor: String, fields: Set<String>) {
            self.at = at
            self.actor = actor
            self.fields = fields
        }
    }

    /// The person's write that overrides `rule` on `field`, among the target's writes (oldest first), or nil.
    public static func overriding(_ rule: Rule, field: String, writes: [Write]) -> Write? {
        guard let acted = writes.lastIndex(where: { $0.actor == rule.actor && $0.fields.contains(field) }) else { return nil }
        return writes[writes.index(after: acted)...].last { write in
            write.fields.contains(field) && !write.actor.hasPrefix(Rule.actorPrefix) && write.actor != CatalogEvent.scheduleActor
                && write.at > rule.writtenAt
        }
    }
}
