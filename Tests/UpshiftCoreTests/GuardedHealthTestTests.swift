import Foundation
import Testing
import UpshiftCore

/// The guarded health test: each cell an e-value under the whole null, false halts under 1 % per release
/// when monitored every day, and a release twice as bad on one OS major halted within days. Serialized:
/// its simulations are seconds of arithmetic each, and two at once would hold both threads of the
/// cooperative pool, which every other suite of the process shares.
@Suite(.serialized) struct GuardedHealthTestTests {
    /// The exact expectation of one cell's factor, summed over Fisher's noncentral hypergeometric law of the
    /// candidate's exits at odds ratio `psi` (computed here from binomial coefficients, not by the type).
    /// With `strata`, the cell is one of the first stratum's: what one cell adds to the whole mixture.
    static func expectedFactor(candidate: Int, baseline: Int, total: Int, psi: Double, strata: [String] = []) -> Double {
        let low = max(0, total - baseline)
        let high = min(candidate, total)
        func logChoose(_ n: Int, _ k: Int) -> Double {
            lgamma(Double(n + 1)) - lgamma(Double(k + 1)) - lgamma(Double(n - k + 1))
        }
        let logWeights = (low...high).map { logChoose(candidate, $0) + logChoose(baseline, total - $0) + Double($0) * log(psi) }
        let top = logWeights.max()!
        let normalizer = logWeights.reduce(0) { $0 + exp($1 - top) }
        var expectation = 0.0
        for (offset, logWeight) in logWeights.enumerated() {
            var test = GuardedHealthTest(strata: strata)
            test.observe(
                stratum: strata.first ?? "17", candidate: .init(installs: candidate, exits: low + offset),
                baseline: .init(installs: baseline, exits: total - low - offset))
            expectation += exp(logWeight - top) / normalizer * test.eValue
        }
        return expectation
    }

    @Test(arguments: [(40, 900, 25), (300, 300, 12), (1_000, 50, 30), (5, 5, 3), (2_000, 2_000, 90)])
    func eachCellIsAnEValueForTheWholeNull(_ candidate: Int, _ baseline: Int, _ total: Int) {
        let atEqualRates = Self.expectedFactor(candidate: candidate, baseline: baseline, total: total, psi: 1)
        #expect(abs(atEqualRates - 1) < 1e-9, "\(atEqualRates)")
        // The weights of the pooled and the per-stratum products add up to 1.
        let stratified = Self.expectedFactor(
            candidate: candidate, baseline: baseline, total: total, psi: 1, strata: ["16", "17", "18"])
        #expect(abs(stratified - 1) < 1e-9, "\(stratified)")
        for psi in [0.3, 0.6, 0.9, 0.99] {
            let better = Self.expectedFactor(candidate: candidate, baseline: baseline, total: total, psi: psi)
            #expect(better <= 1 + 1e-9, "psi \(psi): \(better)")
        }
        // And it is no e-value against a worse candidate: the test has power.
        #expect(Self.expectedFactor(candidate: candidate, baseline: baseline, total: total, psi: 2) > 1.05)
    }

    @Test func cellsWithoutEvidenceLeaveItAtOne() {
        var test = GuardedHealthTest(strata: ["17", "18"])
        test.observe(stratum: "17", candidate: .init(installs: 500, exits: 0), baseline: .init(installs: 800, exits: 0))
        test.observe(stratum: "18", candidate: .init(installs: 0, exits: 0), baseline: .init(installs: 800, exits: 30))
        test.observe(stratum: "16", candidate: .init(installs: 200, exits: 9), baseline: .init(installs: 0, exits: 0))
        // More exits than installs is read as every install exiting: one outcome possible, no evidence.
        test.observe(stratum: "17", candidate: .init(installs: 10, exits: 50), baseline: .init(installs: 10, exits: 10))
        #expect(test.eValue == 1)
        #expect(!test.rejects)
        #expect(test.cells == 4)
    }

    @Test func overwhelmingEvidenceStaysFinite() {
        var test = GuardedHealthTest(strata: ["17"])
        for _ in 0..<2_000 {
            test.observe(stratum: "17", candidate: .init(installs: 1_000, exits: 400), baseline: .init(installs: 1_000, exits: 10))
        }
        #expect(test.rejects)
        #expect(test.logEValue.isFinite && test.logEValue > 10_000)
    }

    /// A fleet of one release beside its baseline: 4 OS majors with their own exit rates, the candidate
    /// rolled out over its first week, one cell per OS major and day, looked at after every day.
    struct Release {
        var rates: [Double] = [0.01, 0.02, 0.03, 0.05]
        var candidateFactor: [Double] = [1, 1, 1, 1]

        /// Whether the test has a product per OS major besides the pooled one.
        var stratified = true

        /// The day (0-based) the test first rejects, or nil over `days`.
        func haltDay(days: Int = 30, random: inout SplitMix64) -> Int? {
            var test = GuardedHealthTest(strata: stratified ? rates.indices.map(String.init) : [])
            for day in 0..<days {
                for (major, rate) in rates.enumerated() {
                    let candidateInstalls = 60 + 540 * min(day, 7) / 7
                    let baselineInstalls = 800
                    let candidate = Self.binomial(candidateInstalls, rate * candidateFactor[major], &random)
                    let baseline = Self.binomial(baselineInstalls, rate, &random)
                    test.observe(
                        stratum: String(major), candidate: .init(installs: candidateInstalls, exits: candidate),
                        baseline: .init(installs: baselineInstalls, exits: baseline))
                }
                if test.rejects { return day }
            }
            return nil
        }

        /// Binomial(n, p) by inversion.
        static func binomial(_ n: Int, _ p: Double, _ random: inout SplitMix64) -> Int {
            let u = random.unit()
            var probability = pow(1 - p, Double(n))
            var cumulative = probability
            var k = 0
            while cumulative < u && k < n {
                probability *= Double(n - k) / Double(k + 1) * p / (1 - p)
                k += 1
                cumulative += probability
            }
            return k
        }
    }

    @Test(arguments: [("equal rates", 1.0), ("a better candidate", 0.6)])
    func aHealthyReleaseIsAlmostNeverHalted(_ name: String, _ factor: Double) {
        var random = SplitMix64(seed: 42)
        let release = Release(candidateFactor: [factor, factor, factor, factor])
        let releases = 1_000
        let halted = (0..<releases).count { _ in release.haltDay(random: &random) != nil }
        print("guarded health test, \(name): \(halted) of \(releases) releases halted within 30 days")
        // The guarantee is at most 1 % in expectation; 19 of 1,000 is the 99.5 % quantile of Binomial(1,000, 1 %).
        #expect(halted <= 19, "\(halted) false halts")
    }

    @Test func aReleaseTwiceAsBadOnOneOSMajorIsHaltedWithinDays() throws {
        var random = SplitMix64(seed: 7)
        let release = Release(candidateFactor: [1, 2, 1, 1])
        let releases = 200
        let days = (0..<releases).compactMap { _ in release.haltDay(random: &random) }
        let median = try #require(days.sorted().dropFirst(days.count / 2).first)
        print("guarded health test, twice as bad on one OS major: \(days.count) of \(releases) halted within 30 days, median day \(median)")
        #expect(days.count >= releases * 95 / 100)
        #expect(median <= 7)

        // The per-OS-major half is what finds it early: pooled alone, the healthy majors dilute it.
        var again = SplitMix64(seed: 7)
        let pooled = Release(candidateFactor: [1, 2, 1, 1], stratified: false)
        let pooledDays = (0..<releases).compactMap { _ in pooled.haltDay(random: &again) }
        let pooledMedian = pooledDays.sorted().dropFirst(pooledDays.count / 2).first ?? 30
        print("pooled only: \(pooledDays.count) of \(releases) halted within 30 days, median day \(pooledMedian)")
        #expect(pooledMedian > median)
    }

    /// Installs with rates of their own (a Beta law around their OS major's rate, its standard deviation
    /// `spread` times the mean), each counted once: in the cohort of its first day on the release, as
    /// exiting when it reports an abnormal exit within its first `window` days. Both releases ramp alike.
    struct Cohorts {
        var spread: Double
        var candidateFactor = 1.0
        let window = 3
        let rates = [0.01, 0.02, 0.03, 0.05]

        func halted(days: Int = 30, random: inout SplitMix64) -> Bool {
            var test = GuardedHealthTest(strata: rates.indices.map(String.init))
            for day in 0..<days {
                let adopters = { (fleet: Int) in day < 7 ? fleet / 10 : (day < 14 ? fleet / 40 : 5) }
                for (major, rate) in rates.enumerated() {
                    let (candidate, baseline) = (adopters(1_500), adopters(2_000))
                    let factor = major == 1 ? candidateFactor : 1
                    test.observe(
                        stratum: String(major),
                        candidate: .init(installs: candidate, exits: exits(candidate, rate * factor, &random)),
                        baseline: .init(installs: baseline, exits: exits(baseline, rate, &random)))
                }
                if test.rejects { return true }
            }
            return false
        }

        /// How many of `installs` new installs report an exit within `window` days.
        func exits(_ installs: Int, _ mean: Double, _ random: inout SplitMix64) -> Int {
            (0..<installs).count { _ in
                let rate = Self.beta(mean: mean, deviation: min(spread * mean, (mean * (1 - mean)).squareRoot() * 0.99), &random)
                return (0..<window).contains { _ in random.chance(rate) }
            }
        }

        static func beta(mean: Double, deviation: Double, _ random: inout SplitMix64) -> Double {
            let size = mean * (1 - mean) / (deviation * deviation) - 1
            let x = gamma(mean * size, &random)
            return x / (x + gamma((1 - mean) * size, &random))
        }

        /// Marsaglia and Tsang's method (shape below 1 boosted by a uniform's power).
        static func gamma(_ shape: Double, _ random: inout SplitMix64) -> Double {
            if shape < 1 { return gamma(shape + 1, &random) * pow(random.unit(), 1 / shape) }
            let d = shape - 1.0 / 3
            let c = 1 / (9 * d).squareRoot()
            while true {
                var x = 0.0
                var v = 0.0
                repeat {
                    x = (-2 * log(max(random.unit(), .leastNormalMagnitude))).squareRoot() * cos(2 * .pi * random.unit())
                    v = 1 + c * x
                } while v <= 0
                v = v * v * v
                if log(max(random.unit(), .leastNormalMagnitude)) < 0.5 * x * x + d - d * v + d * log(v) { return d * v }
            }
        }
    }

    /// Crash-prone installs break no bound when each is counted once: the cells the projection must give.
    @Test func cohortsOfInstallsWithRatesOfTheirOwnKeepFalseHaltsUnderOnePercent() {
        var random = SplitMix64(seed: 5)
        let releases = 300
        let healthy = (0..<releases).count { _ in Cohorts(spread: 2).halted(random: &random) }
        let bad = (0..<100).count { _ in Cohorts(spread: 2, candidateFactor: 2).halted(random: &random) }
        print("guarded health test, cohorts of installs with rates of their own: \(healthy) of \(releases) healthy halted, \(bad) of 100 twice as bad")
        #expect(healthy <= 8)  // the 99.5 % quantile of Binomial(300, 1 %)
        #expect(bad >= 70)
    }
}
