import Foundation

/// One cell of a release's health cohorts (`health_cohorts`, docs/PROJECTIONS.md): the installs whose
/// first event on the release fell on `day` with an OS of major `osMajor`, and how many of them reported
/// an abnormal exit of it within 72 hours of that event.
public struct HealthCohortCell: Sendable, Equatable {
    public var osMajor: String
    public var day: UTCDay
    public var installs: Int
    public var exited: Int

    public init(osMajor: String, day: UTCDay, installs: Int, exited: Int) {
        self.osMajor = osMajor
        self.day = day
        self.installs = installs
        self.exited = exited
    }
}

/// A release's cohorts as a health rule reads them.
public struct ReleaseCohorts: Sendable, Equatable {
    public var version: String
    public var releasedAt: Date
    public var cells: [HealthCohortCell]
    /// Whether any install ever reported an abnormal exit of it (`health_daily`, as the release report
    /// says): a previous release without one is no baseline.
    public var exitsOnRecord: Bool

    public init(version: String, releasedAt: Date, cells: [HealthCohortCell], exitsOnRecord: Bool) {
        self.version = version
        self.releasedAt = releasedAt
        self.cells = cells
        self.exitsOnRecord = exitsOnRecord
    }
}

/// How a halt-on-health rule decides that a release R is worse than its previous release P.
public enum HealthHaltMode: Sendable, Equatable {
    /// R's rate of installs exiting within 72 h exceeds P's, over the same matched cohorts, by more than
    /// `excess` (0–1), with at least `minimumInstalls` installs of R in those cohorts.
    case threshold(excess: Double, minimumInstalls: Int)
    /// ``GuardedHealthTest`` over the matched cohorts, at a false-halt bound of 1 %.
    case guarded
}

/// What a halt-on-health rule sees (docs/PROJECTIONS.md, "Release health: the decisions the rules take"):
/// R's cohorts matched with P's of the same OS major and the same age (days since each one's own release
/// day), over R's first 30 days, each cohort once it can no longer change much (``HealthRule/settledDays``
/// after its day).
public struct HealthEvaluation: Sendable, Equatable {
    public enum Outcome: String, Sendable {
        /// No previous release, or it has no abnormal exit on record: never halted on health.
        case noBaseline = "no baseline"
        case within
        case regressed
    }

    public var outcome: Outcome
    /// The matched cohorts read (pairs with installs on both sides), and their sums on each side.
    public var cohorts = 0
    public var installs = 0
    public var exited = 0
    public var baselineInstalls = 0
    public var baselineExited = 0
    /// The guarded test's e-value (1 before any evidence); nil in threshold mode.
    public var eValue: Double?
    public var baselineVersion: String?

    /// The figures, as a rule's reason states them.
    public var summary: String {
        guard let baselineVersion, outcome != .noBaseline else { return "no baseline" }
        func rate(_ exited: Int, _ installs: Int) -> String {
            installs == 0 ? "–" : String(format: "%.2f %%", 100 * Double(exited) / Double(installs))
        }
        var text =
            "\(exited) of \(installs) installs exited within 72 h (\(rate(exited, installs))) against \(baselineVersion)'s "
            + "\(baselineExited) of \(baselineInstalls) (\(rate(baselineExited, baselineInstalls))) over \(cohorts) matched cohorts"
        if let eValue { text += String(format: ", e-value %.3g (halts at %.0f)", eValue, 1 / HealthRule.alpha) }
        return text
    }
}

/// The halt-on-health rule's decision, a pure function of the read models' cohorts and the clock.
public enum HealthRule {
    /// A release is watched over its first 30 days (cohort ages 0–29).
    public static let monitoredDays = 30
    /// A cohort of day d is read from the start of day d + 5: the day's installs' 72-hour windows have all
    /// ended (d + 4) and a day more lets the exits they report at their next launch arrive.
    public static let settledDays = 5
    public static let alpha = 0.01

    /// Whether the cohort of `day` is read at `now`.
    public static func isSettled(_ day: UTCDay, now: Date) -> Bool {
        UTCDay(now) >= day.adding(days: settledDays)
    }

    public static func evaluate(
        _ mode: HealthHaltMode, release: ReleaseCohorts, previous: ReleaseCohorts?, now: Date
    ) -> HealthEvaluation {
        guard let previous, previous.exitsOnRecord else { return HealthEvaluation(outcome: .noBaseline) }
        var evaluation = HealthEvaluation(outcome: .within, baselineVersion: previous.version)
        let ownStart = UTCDay(release.releasedAt), baseStart = UTCDay(previous.releasedAt)
        func byAge(_ cohorts: ReleaseCohorts, start: UTCDay) -> [Int: [String: HealthCohortCell]] {
            var cells: [Int: [String: HealthCohortCell]] = [:]
            for cell in cohorts.cells where isSettled(cell.day, now: now) {
                let age = cell.day.number - start.number
                guard age >= 0, age < monitoredDays else { continue }
                cells[age, default: [:]][cell.osMajor] = cell
            }
            return cells
        }
        let own = byAge(release, start: ownStart), base = byAge(previous, start: baseStart)
        var test = GuardedHealthTest(
            alpha: alpha, strata: Array(Set(base.values.flatMap(\.keys))))
        for age in 0..<monitoredDays {
            guard let cells = own[age], let baseCells = base[age] else { continue }
            for os in cells.keys.sorted() {
                guard let cell = cells[os], let baseCell = baseCells[os], cell.installs > 0, baseCell.installs > 0 else { continue }
                evaluation.cohorts += 1
                evaluation.installs += cell.installs
                evaluation.exited += cell.exited
                evaluation.baselineInstalls += baseCell.installs
                evaluation.baselineExited += baseCell.exited
                test.observe(
                    stratum: os, candidate: .init(installs: cell.installs, exits: cell.exited),
                    baseline: .init(installs: baseCell.installs, exits: baseCell.exited))
            }
        }
        switch mode {
        case .guarded:
            evaluation.eValue = test.eValue
            if test.rejects { evaluation.outcome = .regressed }
        case .threshold(let excess, let minimumInstalls):
            guard evaluation.installs >= minimumInstalls, evaluation.installs > 0, evaluation.baselineInstalls > 0 else { break }
            let rate = Double(evaluation.exited) / Double(evaluation.installs)
            let baselineRate = Double(evaluation.baselineExited) / Double(evaluation.baselineInstalls)
            if rate - baselineRate > excess { evaluation.outcome = .regressed }
        }
        return evaluation
    }
}
