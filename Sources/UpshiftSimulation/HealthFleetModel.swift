import Foundation
import UpshiftCore

/// The guarded health rule on a fleet's own counts, without a server: installs over four OS majors, each
/// opening the app as its habits say (``InstallHabits``), take a previous release and then a candidate as
/// each rolls out on the App Store's schedule (1 % to 100 % over 6 days, an install admitted once the step
/// passes its bucket), and report an abnormal exit on a day they open the app with a chance of 2 % (twice
/// that for a bad candidate on one OS major). The rule reads the cells `release_health` keeps (per OS major
/// and first day on the release: the installs, and those that exited within their first three days) once
/// a day, as the rollout worker would.
///
/// Who updates when is drawn once (one adoption path); each trial draws the exits again, so that 200 releases
/// cost 200 draws of 40,000 installs rather than 200 fleets.
public struct HealthFleetModel: Sendable {
    public static let osMajors = ["14", "15", "16", "17"]
    public static let badOSMajor = "17"
    /// Days from the previous release to the candidate.
    public static let candidateDay = 40
    public static let start = Date(timeIntervalSince1970: 1_767_225_600)  // 2026-01-01T00:00:00Z

    /// One install's first days on a release: its cell (OS major, day), and on how many of its first three
    /// days it opened the app (each a chance to exit).
    struct Cohort: Sendable {
        var os: String
        var day: Int
        var openedDays: Int
    }

    let previous: [Cohort]
    let candidate: [Cohort]
    /// Per day since the candidate's release: the share of that day's active installs on it.
    public let candidateShare: [Double]
    /// Per day since the candidate's release: how many installs on it, on ``badOSMajor``, opened the app that
    /// day (each a chance to exit, at any age).
    let candidateOpenings: [Int]
    public let installs: Int

    /// Draws the adoption path of `installs` installs from `seed`.
    public init(installs: Int, seed: UInt64) {
        var random = SplitMix64(seed: seed)
        struct Install {
            var os: String
            var habits: InstallHabits
            var bucket: Double
            var version = 0  // 0: before the previous release, 1: the previous release, 2: the candidate
            var opened: [Int] = []  // days it opened the app since its last update, up to three
            var firstDay = 0
        }
        var fleet = (0..<installs).map { index in
            Install(os: Self.osMajors[index % Self.osMajors.count], habits: InstallHabits(random: &random), bucket: random.unit())
        }
        var cohorts: [[Cohort]] = [[], [], []]
        var share: [Double] = []
        var openings: [Int] = []
        let lastDay = Self.candidateDay + HealthRule.monitoredDays + HealthRule.settledDays
        func percent(_ day: Int, releasedOn release: Int) -> Double {
            let age = day - release
            guard age >= 0 else { return 0 }
            return RolloutSchedule.appStoreSteps.last { $0.afterHours <= Double(age * 24) }?.percent ?? 0
        }
        for day in 0...lastDay {
            var active = 0, onCandidate = 0, openedOnBadCandidate = 0
            for index in fleet.indices {
                var install = fleet[index]
                guard random.chance(install.habits.launchProbability) else { continue }
                let newest = day >= Self.candidateDay ? 2 : 1
                let release = newest == 2 ? Self.candidateDay : 0
                if install.version < newest, install.bucket * 100 < percent(day, releasedOn: release),
                    random.chance(install.habits.updateHazard)
                {
                    if install.version > 0 {
                        cohorts[install.version].append(Cohort(os: install.os, day: install.firstDay, openedDays: install.opened.count))
                    }
                    install.version = newest
                    install.firstDay = day
                    install.opened = []
                }
                if install.version > 0, day - install.firstDay < 3 { install.opened.append(day) }
                active += 1
                if install.version == 2 {
                    onCandidate += 1
                    if install.os == Self.badOSMajor { openedOnBadCandidate += 1 }
                }
                fleet[index] = install
            }
            if day >= Self.candidateDay {
                share.append(active == 0 ? 0 : Double(onCandidate) / Double(active))
                openings.append(openedOnBadCandidate)
            }
        }
        for install in fleet where install.version > 0 {
            cohorts[install.version].append(Cohort(os: install.os, day: install.firstDay, openedDays: install.opened.count))
        }
        previous = cohorts[1]
        candidate = cohorts[2]
        candidateShare = share
        candidateOpenings = openings
        self.installs = installs
    }

    /// The cells of one draw of the exits: each install exits in its first three days with the chance that
    /// one of the days it opened the app ended abnormally.
    static func cells(_ cohorts: [Cohort], rate: (String) -> Double, random: inout SplitMix64)
        -> [HealthCohortCell]
    {
        let start = UTCDay(Self.start)
        return HealthCohortCell.counting(
            cohorts.map { cohort in
                let chance = 1 - pow(1 - rate(cohort.os), Double(cohort.openedDays))
                return (cohort.os, start.adding(days: cohort.day), random.chance(chance))
            })
    }

    /// The first day since the candidate's release on which the guarded rule halts it, evaluating once a day
    /// (an hour into the day) over its 30 monitored days and the 5 more their cohorts take to settle; nil
    /// when it never does. `badFactor` multiplies the exit rate of the candidate on ``badOSMajor``.
    public func firstHalt(rate: Double, badFactor: Double, random: inout SplitMix64) -> Int? {
        let releasedAt = { (day: Int) in Self.start.addingTimeInterval(Double(day) * 86_400 + 10 * 3_600) }
        let baseline = ReleaseCohorts(
            version: "1.0.0", releasedAt: releasedAt(0),
            cells: Self.cells(previous, rate: { _ in rate }, random: &random), exitsOnRecord: true)
        let release = ReleaseCohorts(
            version: "2.0.0", releasedAt: releasedAt(Self.candidateDay),
            cells: Self.cells(candidate, rate: { $0 == Self.badOSMajor ? rate * badFactor : rate }, random: &random),
            exitsOnRecord: true)
        for age in 0..<(HealthRule.monitoredDays + HealthRule.settledDays) {
            let now = Self.start.addingTimeInterval(Double(Self.candidateDay + age) * 86_400 + 3_600)
            if HealthRule.evaluate(.guarded, release: release, previous: baseline, now: now).outcome == .regressed { return age }
        }
        return nil
    }

    /// The guarded rule over `healthy` healthy candidates and `bad` twice as bad on ``badOSMajor``, each a new
    /// draw of the exits on this adoption path: how many of each it halted, and on which day.
    public struct Trials: Sendable {
        public var healthy: Int
        public var falseHalts: Int
        public var bad: Int
        /// The bad candidates halted: the day since the release and the share of that day's active installs
        /// on it, earliest first.
        public var halts: [Halt]

        public struct Halt: Sendable {
            public var day: Int
            public var share: Double
        }

        public var median: Halt? { halts.isEmpty ? nil : halts[halts.count / 2] }

        public var summary: String {
            func percent(_ share: Double?) -> String { String(format: "%.1f", 100 * (share ?? 0)) }
            return "\(falseHalts) of \(healthy) healthy releases halted; \(halts.count) of \(bad) twice as bad on iOS "
                + "\(HealthFleetModel.badOSMajor) halted, median on day \(median?.day ?? -1) with \(percent(median?.share)) % of "
                + "active installs on it (first: day \(halts.first?.day ?? -1), \(percent(halts.first?.share)) %)"
        }
    }

    public func trials(healthy: Int, bad: Int, seed: UInt64) async -> Trials {
        var random = SplitMix64(seed: seed)
        var trials = Trials(healthy: healthy, falseHalts: 0, bad: bad, halts: [])
        for _ in 0..<healthy {
            if firstHalt(rate: 0.02, badFactor: 1, random: &random) != nil { trials.falseHalts += 1 }
            await Task.yield()
        }
        for _ in 0..<bad {
            if let day = firstHalt(rate: 0.02, badFactor: 2, random: &random) {
                trials.halts.append(Trials.Halt(day: day, share: candidateShare[day]))
            }
            await Task.yield()
        }
        trials.halts.sort { $0.day < $1.day }
        return trials
    }
}

extension HealthFleetModel {
    /// The most any test can do before the candidate reaches `share` of the day's active installs, on this
    /// adoption path: the chance that a release `badFactor` times as prone to exit on ``badOSMajor`` is told
    /// from a healthy one by then, at a false-halt rate of at most `alpha`.
    ///
    /// The test granted here knows more than any rule can: the baseline rate exactly, which OS major is bad and
    /// by how much, and every opening of the app on the candidate on that OS major up to the end of the last
    /// day below `share`, each exit reported at once (not only the installs' first three days, a day later).
    /// Its data are then the exits X among those N openings, binomial with the chance `rate` if the release is
    /// healthy and `rate × badFactor` if not. By the Neyman–Pearson lemma the most powerful test at level
    /// `alpha` halts when X ≥ k, and with chance γ when X = k − 1, for the k and γ that make its false-halt
    /// rate exactly `alpha`. Any rule halting before `share` at a false-halt rate of at most `alpha` is a
    /// test at that level on these data (with chance thrown in from what the oracle holds fixed), so the
    /// chance that the best test halts a bad release bounds the chance of every rule.
    public struct Ceiling: Sendable {
        /// The last day since the release on which its share of active installs stays below the bound.
        public var day: Int
        public var openings: Int
        /// The fewest exits at which the best test always halts.
        public var critical: Int
        /// The chance that it halts a bad release by `day`.
        public var power: Double

        public var summary: String {
            String(
                format: "by day %d (%d openings on iOS %@), the most powerful test at a 1 %% false-halt rate halts "
                    + "on %d exits or more, which a release twice as bad reaches with a chance of %.1f %%",
                day, openings, HealthFleetModel.badOSMajor, critical, 100 * power)
        }
    }

    public func ceiling(belowShare share: Double, rate: Double, badFactor: Double, alpha: Double) -> Ceiling {
        let day = (candidateShare.firstIndex { $0 >= share } ?? candidateShare.count) - 1
        let n = day < 0 ? 0 : candidateOpenings[...day].reduce(0, +)
        let (healthy, bad) = (Self.binomialTails(of: n, chance: rate), Self.binomialTails(of: n, chance: rate * badFactor))
        let k = healthy.firstIndex { $0 <= alpha }!  // healthy[n + 1] is 0
        guard k > 0 else { return Ceiling(day: day, openings: n, critical: 0, power: 1) }
        // At X = k − 1 it halts with the chance γ that brings its false-halt rate to `alpha`.
        let gamma = (alpha - healthy[k]) / (healthy[k - 1] - healthy[k])
        return Ceiling(day: day, openings: n, critical: k, power: bad[k] + gamma * (bad[k - 1] - bad[k]))
    }

    /// P(X ≥ k) for X binomial with `n` trials of chance `p`.
    public static func binomialTail(atLeast k: Int, of n: Int, chance p: Double) -> Double {
        binomialTails(of: n, chance: p)[min(max(k, 0), n + 1)]
    }

    /// P(X ≥ k) for k = 0 … n + 1, X binomial with `n` trials of chance `p`.
    static func binomialTails(of n: Int, chance p: Double) -> [Double] {
        let logP = log(p), logQ = log1p(-p)
        var logChance = Double(n) * logQ  // of x exits, from x = 0 on
        var chances: [Double] = []
        for x in 0...n {
            chances.append(exp(logChance))
            logChance += log(Double(n - x)) - log(Double(x + 1)) + logP - logQ
        }
        // Summed from the top, so that small tails keep their precision.
        var tails = [Double](repeating: 0, count: n + 2)
        for x in stride(from: n, through: 1, by: -1) { tails[x] = min(1, tails[x + 1] + chances[x]) }
        tails[0] = 1
        return tails
    }
}

extension HealthCohortCell {
    /// An install of a release's cohorts: the OS major and UTC day of its first event on the release, and
    /// whether it exited within its window.
    typealias Member = (os: String, day: UTCDay, exited: Bool)

    /// The cells `members` fall in, per OS major and day: how many installs, and how many of them exited.
    static func counting(_ members: [Member]) -> [HealthCohortCell] {
        struct Cell: Hashable {
            var os: String
            var day: UTCDay
        }
        var counts: [Cell: (installs: Int, exited: Int)] = [:]
        for member in members {
            let cell = Cell(os: member.os, day: member.day)
            counts[cell, default: (0, 0)].installs += 1
            if member.exited { counts[cell, default: (0, 0)].exited += 1 }
        }
        return counts.map { HealthCohortCell(osMajor: $0.key.os, day: $0.key.day, installs: $0.value.installs, exited: $0.value.exited) }
    }
}
