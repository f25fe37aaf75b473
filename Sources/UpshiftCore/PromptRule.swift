import Foundation

/// The halt-on-prompts rule's decision (docs/OPERATIONS.md, "Rules"), a pure function of a release's
/// prompt funnels: among the installs prompted for it (shown a soft or a forced prompt, counted per kind: the
/// funnels are kept per kind, so an install shown both counts in each), the share that chose "skip this
/// version" and the share that were blocked; it halts when one exceeds its threshold with at least
/// `minimumInstalls` prompted.
public enum PromptRule {
    public struct Evaluation: Sendable, Equatable {
        public var regressed: Bool
        public var prompted: Int
        public var skipped: Int
        public var blocked: Int

        public var summary: String {
            func share(_ count: Int) -> String {
                prompted == 0 ? "–" : String(format: "%.1f %%", 100 * Double(count) / Double(prompted))
            }
            return "\(prompted) installs prompted: \(skipped) skipped it (\(share(skipped))), \(blocked) blocked (\(share(blocked)))"
        }
    }

    public static func evaluate(
        _ funnels: [PromptFunnelReport.Funnel], skip: Double?, blocked: Double?, minimumInstalls: Int
    ) -> Evaluation {
        var evaluation = Evaluation(
            regressed: false, prompted: funnels.map(\.shown).reduce(0, +), skipped: funnels.map(\.dismissedSkip).reduce(0, +),
            blocked: funnels.map(\.blocked).reduce(0, +))
        guard evaluation.prompted >= minimumInstalls, evaluation.prompted > 0 else { return evaluation }
        let total = Double(evaluation.prompted)
        if let skip, Double(evaluation.skipped) / total > skip { evaluation.regressed = true }
        if let blocked, Double(evaluation.blocked) / total > blocked { evaluation.regressed = true }
        return evaluation
    }
}
