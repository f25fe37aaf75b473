import Foundation
import Testing
import UpshiftCore

/// The halt-on-health rule's decision over matched cohorts: no baseline, which cohorts it reads and when,
/// the threshold mode, and the guarded mode's false halts and detections over whole 30-day releases.
@Suite(.serialized) struct HealthRuleTests {
    static let day: TimeInterval = 86_400
    /// 2026-03-01T10:00:00Z: the previous release; the candidate goes out 40 days later.
    static let previousAt = Date(timeIntervalSince1970: 1_772_359_200)
    static let releaseAt = previousAt.addingTimeInterval(40 * day)

    static func cells(start: Date, days: Range<Int>, _ counts: (Int, String) -> (Int, Int)) -> [HealthCohortCell] {
        days.flatMap { age in
            ["16", "17", "18"].map { os in
                let (installs, exited) = counts(age, os)
                return HealthCohortCell(osMajor: os, day: UTCDay(start).adding(days: age), installs: installs, exited: exited)
            }
        }
    }

    static func release(_ version: String, at date: Date, days: Range<Int> = 0..<30, exits: Bool = true,
                        _ counts: (Int, String) -> (Int, Int)) -> ReleaseCohorts {
        ReleaseCohorts(version: version, releasedAt: date, cells: cells(start: date, days: days, counts), exitsOnRecord: exits)
    }

    @Test func withoutAPreviousReleaseOrItsExitsThereIsNoBaseline() {
        let bad = Self.release("2.0.0", at: Self.releaseAt) { _, _ in (1_000, 500) }
        let later = Self.releaseAt.addingTimeInterval(40 * Self.day)
        for mode in [HealthHaltMode.guarded, .threshold(excess: 0.01, minimumInstalls: 10)] {
            let none = HealthRule.evaluate(mode, release: bad, previous: nil, now: later)
            #expect(none.outcome == .noBaseline && none.summary == "no baseline")
            let silent = Self.release("1.9.0", at: Self.previousAt, exits: false) { _, _ in (1_000, 0) }
            #expect(HealthRule.evaluate(mode, release: bad, previous: silent, now: later).outcome == .noBaseline)
        }
    }

    @Test func aCohortIsReadFromFiveDaysAfterItsDayAndOnlyOverTheFirstThirtyDays() {
        let previous = Self.release("1.9.0", at: Self.previousAt, days: 0..<40) { _, _ in (100, 2) }
        // Before the release (testers, age −1) and from day 30 on, the cohorts are the worst possible.
        let release = Self.release("2.0.0", at: Self.releaseAt, days: -1..<40) { age, _ in
            age < 0 || age >= 30 ? (100, 100) : (100, 2)
        }
        let mode = HealthHaltMode.threshold(excess: 0, minimumInstalls: 1)
        let releaseDay = UTCDay(Self.releaseAt).start
        // On the release's day + 4, nothing is settled; on day + 5, the three cohorts of its first day are.
        #expect(HealthRule.evaluate(mode, release: release, previous: previous, now: releaseDay.addingTimeInterval(5 * Self.day - 1)).cohorts == 0)
        let first = HealthRule.evaluate(mode, release: release, previous: previous, now: releaseDay.addingTimeInterval(5 * Self.day))
        #expect(first.cohorts == 3 && first.installs == 300 && first.exited == 6 && first.baselineExited == 6)
        let all = HealthRule.evaluate(mode, release: release, previous: previous, now: releaseDay.addingTimeInterval(100 * Self.day))
        #expect(all.cohorts == 90 && all.outcome == .within, "\(all)")
    }

    @Test func theThresholdModeComparesRatesOverTheMatchedCohortsWithEnoughInstalls() {
        let previous = Self.release("1.9.0", at: Self.previousAt) { _, _ in (200, 4) }  // 2 %
        let release = Self.release("2.0.0", at: Self.releaseAt, days: 0..<10) { _, os in os == "17" ? (100, 8) : (100, 2) }
        let now = Self.releaseAt.addingTimeInterval(20 * Self.day)
        // 30 cohorts settled: 10 days × (8 + 2 + 2) = 120 exits of 3,000 installs, 4 %, against 2 %.
        let worse = HealthRule.evaluate(.threshold(excess: 0.015, minimumInstalls: 3_000), release: release, previous: previous, now: now)
        #expect(worse.outcome == .regressed && worse.installs == 3_000 && worse.exited == 120, "\(worse)")
        #expect(worse.summary.hasPrefix("120 of 3000 installs exited within 72 h (4.00 %) against 1.9.0's 120 of 6000 (2.00 %)"), "\(worse.summary)")
        #expect(HealthRule.evaluate(.threshold(excess: 0.025, minimumInstalls: 10), release: release, previous: previous, now: now).outcome == .within)
        #expect(HealthRule.evaluate(.threshold(excess: 0.015, minimumInstalls: 3_001), release: release, previous: previous, now: now).outcome == .within)
    }

    /// Cohorts of a release of `installs` installs a day per OS major, each exiting with `rate` (or
    /// `rate × badFactor` on iOS 17), drawn install by install.
    static func simulated(
        _ version: String, at date: Date, rate: Double, badFactor: Double = 1, installs: Int, random: inout SplitMix64
    ) -> ReleaseCohorts {
        release(version, at: date) { _, os in
            let p = os == "17" ? rate * badFactor : rate
            var exited = 0
            for _ in 0..<installs where Double(random.next() >> 11) / Double(1 << 53) < p { exited += 1 }
            return (installs, exited)
        }
    }

    /// 200 healthy releases against their previous release, each evaluated every day of its first 30 days
    /// as the worker would: at most 6 halted (the 99.5 % bound of 200 draws at a 1 % rate). And releases
    /// twice as bad on one OS major of three (150 new installs a day on each) are halted, nearly all within
    /// the 35 days their first 30 days of cohorts take to settle (48 of 50 at this seed, median day 19).
    /// (It yields between releases: seconds of arithmetic on the cooperative pool's two threads would
    /// hold back every other suite of the process, whose deadlines are real time.)
    @Test func theGuardedModeRarelyHaltsAHealthyReleaseAndHaltsABadOne() async {
        var random = SplitMix64(seed: 20_261_202)
        func firstHalt(_ release: ReleaseCohorts, _ previous: ReleaseCohorts) -> Int? {
            for day in 0..<(30 + HealthRule.settledDays) {
                let now = UTCDay(Self.releaseAt).start.addingTimeInterval(Double(day) * Self.day + 3_600)
                if HealthRule.evaluate(.guarded, release: release, previous: previous, now: now).outcome == .regressed { return day }
            }
            return nil
        }
        var falseHalts = 0
        for index in 0..<200 {
            let previous = Self.simulated("1.\(index).0", at: Self.previousAt, rate: 0.02, installs: 150, random: &random)
            let release = Self.simulated("2.\(index).0", at: Self.releaseAt, rate: 0.02, installs: 150, random: &random)
            if firstHalt(release, previous) != nil { falseHalts += 1 }
            await Task.yield()
        }
        var halts: [Int] = []
        for index in 0..<50 {
            let previous = Self.simulated("1.\(index).0", at: Self.previousAt, rate: 0.02, installs: 150, random: &random)
            let release = Self.simulated("2.\(index).0", at: Self.releaseAt, rate: 0.02, badFactor: 2, installs: 150, random: &random)
            if let day = firstHalt(release, previous) { halts.append(day) }
            await Task.yield()
        }
        halts.sort()
        print("HealthRuleTests: \(falseHalts) of 200 healthy releases halted; \(halts.count) of 50 bad ones, median day \(halts.isEmpty ? -1 : halts[halts.count / 2])")
        #expect(falseHalts <= 6)
        #expect(halts.count >= 45)
        #expect(!halts.isEmpty && halts[halts.count / 2] <= 24)
    }
}
