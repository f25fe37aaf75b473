import Foundation

/// The halt-on-prompts rule's decision (docs/OPERATIONS.md, "Rules"), a pure function of a release's
/// prompt funnels and its unfinished starts: among the installs prompted for it (shown a soft or a forced
/// prompt, counted per kind: the funnels are kept per kind, so an install shown both counts in each), the
/// share that chose "skip this version" and the share that were blocked; among the installs that started
/// updating to it and whose 24 hours have passed, the share that had not updated by then. It halts when
/// one exceeds its threshold with at least `minimumInstalls` installs counted in that share.
public enum PromptRule {
    public struct Evaluation: Sendable, Equatable {
        public var regressed: Bool
        public var prompted: Int
        public var skipped: Int
        public var blocked: Int
        /// Installs that started updating, 24 hours ago or more, and of those the unfinished.
        public var started: Int
        public var unfinished: Int

        public var summary: String {
            func share(_ count: Int, of total: Int) -> String {
                total == 0 ? "–" : String(format: "%.1f %%", 100 * Double(count) / Double(total))
            }
            return "\(prompted) installs prompted: \(skipped) skipped it (\(share(skipped, of: prompted))), "
                + "\(blocked) blocked (\(share(blocked, of: prompted))); \(started) started updating 24 h ago or more: "
                + "\(unfinished) had not updated 24 h later (\(share(unfinished, of: started)))"
        }
    }

    public static func evaluate(
        _ funnels: [PromptFunnelReport.Funnel], starts: (started: Int, unfinished: Int), skip: Double?, blocked: Double?,
        unfinished: Double?, minimumInstalls: Int
    ) -> Evaluation {
        var evaluation = Evaluation(
            regressed: false, prompted: funnels.map(\.shown).reduce(0, +), skipped: funnels.map(\.dismissedSkip).reduce(0, +),
            blocked: funnels.map(\.blocked).reduce(0, +), started: starts.started, unfinished: starts.unfinished)
        func exceeds(_ count: Int, of total: Int, _ threshold: Double?) -> Bool {
            guard let threshold, total >= minimumInstalls, total > 0 else { return false }
            return Double(count) / Double(total) > threshold
        }
        evaluation.regressed =
            exceeds(evaluation.skipped, of: evaluation.prompted, skip)
            || exceeds(evaluation.blocked, of: evaluation.prompted, blocked)
            || exceeds(evaluation.unfinished, of: evaluation.started, unfinished)
        return evaluation
    }
}
