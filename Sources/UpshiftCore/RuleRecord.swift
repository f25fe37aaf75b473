import Foundation

/// What the evaluation of a rule recorded (docs/OPERATIONS.md, "Rules"): an action taken (`acted`; the
/// catalog event is its audit), one a dry run would have taken (`would_act`), an action that failed
/// (`failed`), one it leaves to a person who overrode it (`stands_aside`), an
/// idle spell (`idle`), and an evaluation skipped (`skipped`) because a projection it reads lagged or rebuilt. Each
/// is recorded once per change: an evaluation that would record what the rule's last record for the same
/// release says records nothing.
public struct RuleRecord: Sendable, Equatable, Codable {
    public enum Outcome: String, Sendable, Codable {
        case acted
        case wouldAct = "would_act"
        case failed
        case skipped
        /// The condition does not hold (any more), or there is nothing to do (the minimum is already
        /// there; a release without a baseline): recorded once, so that a dry run's record says when it stopped.
        case idle
        /// The condition holds, but a person changed the field after the rule had set it: the rule does
        /// not act on that release until it is written again.
        case standsAside = "stands_aside"
    }

    public var ruleId: String
    public var platform: Platform
    public var at: Date
    public var outcome: Outcome
    /// The release looked at; nil for a skip.
    public var version: String?
    /// `halt` or `raise_minimum`; nil when the rule does nothing now.
    public var action: String?
    /// The figures the rule saw, and for an action the backtest's.
    public var summary: String

    public init(
        ruleId: String, platform: Platform, at: Date, outcome: Outcome, version: String?, action: String?, summary: String
    ) {
        self.ruleId = ruleId
        self.platform = platform
        self.at = at
        self.outcome = outcome
        self.version = version
        self.action = action
        self.summary = summary
    }

    /// Whether this record says the same as `last` (the rule's previous record for the same release): the
    /// same outcome and action. Figures alone moving is no change.
    public func repeats(_ last: RuleRecord?) -> Bool {
        guard let last else { return false }
        return last.outcome == outcome && last.action == action && last.version == version
    }
}
