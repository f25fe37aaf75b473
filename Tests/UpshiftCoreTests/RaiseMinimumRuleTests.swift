import Foundation
import Testing
import UpshiftCore

/// The raise-minimum rule's decision: each condition holds it back on its own, the catalog's record of the
/// release decides how long it has been out to everyone, installs that cannot update are not forced, and a
/// minimum is never lowered.
@Suite struct RaiseMinimumRuleTests {
    static let day: TimeInterval = 86_400
    static let now = Date(timeIntervalSince1970: 1_780_000_000)
    static let rule = RaiseMinimumRule(version: Version("2.0")!, share: 0.9, windowDays: 7, maximumForced: 50)

    static func release(_ version: String, percent: Double = 100, paused: Bool = false, status: ReleaseStatus = .live,
                        releasedDaysAgo: Double = 20, minimumOS: String? = nil) -> Release {
        Release(
            platform: "ios", version: Version(version)!, releasedAt: now.addingTimeInterval(-releasedDaysAgo * day),
            minimumOSVersion: minimumOS.flatMap(Version.init), status: status, rolloutPercent: percent, rolloutPaused: paused)
    }

    /// The report for 2.0 over the rule's window: `atOrAbove` installs on 2.0, `below` on 1.9 (iOS 17), and
    /// `stuck` on 1.9 with iOS 15, which no release at or above 2.0 admits.
    static func impact(atOrAbove: Int, below: Int, stuck: Int = 0) -> MinimumImpactReport {
        MinimumImpactReport(
            app: "expenses", platform: "ios", minimum: Version("2.0")!, windowDays: 7,
            releases: [release("1.9"), release("2.0", minimumOS: "16.0")], now: now,
            groups: [("2.0.0", "17.4", atOrAbove), ("1.9.0", "17.4", below), ("1.9.0", "15.8", stuck)], dataAsOf: now)
    }

    static func history(_ states: (daysAgo: Double, release: Release)...) -> [(at: Date, release: Release)] {
        states.map { (now.addingTimeInterval(-$0.daysAgo * day), $0.release) }
    }

    @Test func itRaisesOnceEveryConditionHolds() {
        let out = Self.history((20, Self.release("2.0", percent: 10)), (10, Self.release("2.0")))
        let ready = Self.rule.evaluate(currentMinimum: Version("1.5"), impact: Self.impact(atOrAbove: 950, below: 49), history: out, now: Self.now)
        #expect(ready.outcome == .raise && ready.waitingFor.isEmpty, "\(ready)")
        #expect(ready.steadySince == Self.now.addingTimeInterval(-10 * Self.day))
        #expect(ready.summary == "950 of 999 active installs (95.1 %) at or above; 49 would be forced, 0 cannot update on their OS")
    }

    @Test func eachConditionHoldsItBackOnItsOwn() {
        let out = Self.history((10, Self.release("2.0")))
        let few = Self.rule.evaluate(currentMinimum: nil, impact: Self.impact(atOrAbove: 300, below: 40), history: out, now: Self.now)
        #expect(few.outcome == .wait && few.waitingFor == ["90 % of active installs at or above"])
        let many = Self.rule.evaluate(currentMinimum: nil, impact: Self.impact(atOrAbove: 9_000, below: 50), history: out, now: Self.now)
        #expect(many.outcome == .wait && many.waitingFor == ["fewer than 50 installs forced"])
        let none = Self.rule.evaluate(currentMinimum: nil, impact: Self.impact(atOrAbove: 0, below: 0), history: out, now: Self.now)
        #expect(none.outcome == .wait && none.waitingFor == ["90 % of active installs at or above"])
        // At 100 % for six days only.
        let recent = Self.history((20, Self.release("2.0", percent: 50)), (6, Self.release("2.0")))
        let young = Self.rule.evaluate(currentMinimum: nil, impact: Self.impact(atOrAbove: 950, below: 10), history: recent, now: Self.now)
        #expect(young.outcome == .wait && young.waitingFor == ["2.0.0 live at 100 % without a halt for 7 days"])
    }

    @Test func aHaltOrAWithdrawalStartsTheWaitAgainAndAnUnknownReleaseNeverRaises() {
        let impact = Self.impact(atOrAbove: 950, below: 10)
        for interruption in [Self.release("2.0", paused: true), Self.release("2.0", status: .withdrawn)] {
            let history = Self.history((30, Self.release("2.0")), (5, interruption), (4, Self.release("2.0")))
            let evaluation = Self.rule.evaluate(currentMinimum: nil, impact: impact, history: history, now: Self.now)
            #expect(evaluation.outcome == .wait && evaluation.steadySince == Self.now.addingTimeInterval(-4 * Self.day))
        }
        // At 100 % in the catalog since long before it was released: counted from its release.
        let early = Self.history((30, Self.release("2.0", releasedDaysAgo: 3)))
        #expect(Self.rule.evaluate(currentMinimum: nil, impact: impact, history: early, now: Self.now).outcome == .wait)
        #expect(Self.rule.evaluate(currentMinimum: nil, impact: impact, history: [], now: Self.now).outcome == .wait)
    }

    @Test func installsThatCannotUpdateAreNotForcedAndAMinimumIsNeverLowered() {
        let out = Self.history((10, Self.release("2.0")))
        // 100 below, 80 of them on iOS 15 that 2.0 does not support: 20 forced.
        let stuck = Self.rule.evaluate(currentMinimum: nil, impact: Self.impact(atOrAbove: 1_800, below: 20, stuck: 80), history: out, now: Self.now)
        #expect(stuck.outcome == .raise && stuck.forced == 20 && stuck.unableToUpdate == 80, "\(stuck)")
        for minimum in ["2.0", "2.0.0", "2.1"] {
            let done = Self.rule.evaluate(currentMinimum: Version(minimum), impact: Self.impact(atOrAbove: 999, below: 0), history: out, now: Self.now)
            #expect(done.outcome == .done)
        }
    }
}
