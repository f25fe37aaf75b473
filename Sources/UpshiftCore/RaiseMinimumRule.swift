import Foundation

/// The raise-minimum rule (docs/PROJECTIONS.md, "Release health: the decisions the rules take"):
/// raise the minimum to `version` once at least `share` of the installs active in the last `windowDays`
/// days run it or later, fewer than
/// `maximumForced` installs would be forced to update, and the release has been out to everyone (live, at
/// 100 %, not halted) for `windowDays` days by the catalog's own record, which forged events cannot change.
/// Installs whose OS no release at or above `version` admits are never counted as forced: the check tells
/// them `os_unsupported`. It never lowers a minimum.
public struct RaiseMinimumRule: Sendable, Equatable {
    public var version: Version
    /// 0–1.
    public var share: Double
    public var windowDays: Int
    /// The raise waits while this many installs or more would be forced (N, required: a rule without a
    /// bound on whom it blocks could be driven by forged installs).
    public var maximumForced: Int

    public init(version: Version, share: Double, windowDays: Int, maximumForced: Int) {
        self.version = version
        self.share = share
        self.windowDays = windowDays
        self.maximumForced = maximumForced
    }

    public struct Evaluation: Sendable, Equatable {
        public enum Outcome: String, Sendable {
            case raise
            case wait
            /// The minimum is already at or above the rule's version.
            case done
        }

        public var outcome: Outcome
        /// Why it waits, each condition that does not hold (empty when it raises).
        public var waitingFor: [String] = []
        public var activeInstalls = 0
        public var atOrAbove = 0
        public var forced = 0
        public var unableToUpdate = 0
        /// Since when the release has been live at 100 % without a halt, by the catalog's record.
        public var steadySince: Date?

        public var summary: String {
            let share = activeInstalls == 0 ? "–" : String(format: "%.1f %%", 100 * Double(atOrAbove) / Double(activeInstalls))
            var text = "\(atOrAbove) of \(activeInstalls) active installs (\(share)) at or above; \(forced) would be forced, "
                + "\(unableToUpdate) cannot update on their OS"
            if !waitingFor.isEmpty { text += "; waiting for " + waitingFor.joined(separator: ", ") }
            return text
        }
    }

    /// - Parameters:
    ///   - impact: the minimum-impact report for `version` over `windowDays` days, read now.
    ///   - history: the release's states, oldest first, each from the time of the catalog event that wrote it
    ///     (the last is the current one); empty when the catalog has no such release.
    public func evaluate(
        currentMinimum: Version?, impact: MinimumImpactReport, history: [(at: Date, release: Release)], now: Date
    ) -> Evaluation {
        if let currentMinimum, currentMinimum >= version { return Evaluation(outcome: .done) }
        var evaluation = Evaluation(
            outcome: .raise, activeInstalls: impact.activeInstalls, atOrAbove: impact.activeInstalls - impact.below,
            forced: impact.wouldBeBlocked, unableToUpdate: impact.unableToUpdate)
        func offered(_ release: Release) -> Bool {
            release.status == .live && !release.rolloutPaused && release.rolloutPercent >= 100
        }
        for state in history.reversed() {
            guard offered(state.release) else { break }
            evaluation.steadySince = max(state.at, state.release.releasedAt)
        }
        let windowStart = now.addingTimeInterval(-Double(windowDays) * 86_400)
        if evaluation.steadySince.map({ $0 > windowStart }) ?? true {
            evaluation.waitingFor.append("\(version.normalized) live at 100 % without a halt for \(windowDays) days")
        }
        if impact.activeInstalls == 0 || Double(evaluation.atOrAbove) < share * Double(impact.activeInstalls) {
            evaluation.waitingFor.append(String(format: "%.0f %% of active installs at or above", 100 * share))
        }
        if evaluation.forced >= maximumForced {
            evaluation.waitingFor.append("fewer than \(maximumForced) installs forced")
        }
        if !evaluation.waitingFor.isEmpty { evaluation.outcome = .wait }
        return evaluation
    }
}
