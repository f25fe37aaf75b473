import Foundation

/// Whether a release's abnormal exits are worse than its previous release's, tested as the data arrive so
/// that it may be looked at after every day without inflating false alarms (the guarded halt on health).
///
/// The data are matched cells: for one OS major and one day since each release's own release, the
/// installs of the candidate release R in the cell and how many of them reported an abnormal exit, and the
/// same for the baseline release P at the same age (which installs a cell holds: below). The null
/// hypothesis is that in every cell an install of R exits abnormally with at most the probability of an
/// install of P.
///
/// **The test.** Given a cell's total of exits X, the exits of R follow Fisher's noncentral hypergeometric
/// distribution with odds ratio ψ (ψ = 1 when the rates are equal, ψ ≤ 1 under the null), whatever the
/// baseline rate is: the nuisance parameter drops out by conditioning, as in Fisher's exact test. For an
/// alternative ψ₁ > 1 the cell's likelihood ratio against ψ = 1 has expectation exactly 1 at ψ = 1 and at
/// most 1 at any ψ ≤ 1 (the distribution is an exponential family in log ψ and its cumulant function is
/// convex), so it is an e-value for the whole composite null. Products over cells, as the cells arrive, are
/// test supermartingales, and so is any fixed mixture of such products: over a grid of alternatives, and
/// over which cells a product takes. Half the weight goes to products over every cell (one odds ratio for
/// all OS majors), half, shared equally, to products over the cells of one OS major each, so that a release
/// bad on one OS major only is not diluted by the healthy ones. Ville's inequality bounds the chance that
/// the mixture ever reaches 1/α under the null by α, however long it is monitored and across all strata
/// together (Ville, "Étude critique de la notion de collectif", 1939): with the cells below, rejecting at
/// 1/α = 100 gives false halts at most 1 % per release over its whole life, not only its first 30 days.
/// It is the mixture sequential probability ratio test (Robbins, "Statistical methods related to the law
/// of the iterated logarithm", Ann. Math. Statist., 1970), in the e-value form of Grünwald, de Heide and
/// Koolen, "Safe testing" (JRSS B, 2024). Conditioning each cell on its total of events, to compare with
/// matched controls whatever the background rate, is what the binomial MaxSPRT of vaccine-safety
/// surveillance does (Kulldorff et al., "A maximized sequential probability ratio test for drug and vaccine
/// safety surveillance", Sequential Analysis, 2011); a mixture instead of its maximum keeps Ville's bound
/// without critical values computed for a planned length of surveillance.
///
/// **The cells it needs.** The bound holds when, given the cells' sizes, each install of a cell has the same
/// chance of an exit as any other install of the cell, independently of the other installs and of earlier
/// cells. Installs differ (some devices crash far more often than others), so a cell must count each install
/// once: its cohort of installs (those whose first day on the release was that day of its age, on that OS
/// major), each counted as exiting when it reported an abnormal exit within a fixed number of days of that
/// first day. Daily counts of active installs violate this: the same crash-prone installs come back every
/// day on one side. `GuardedHealthTestTests` measures cohorts of installs with persistent rates of their own.
/// Each cell must be observed once, when its window has closed, with counts that no longer change.
public struct GuardedHealthTest: Sendable, Equatable {
    /// The odds ratios the mixture bets on, with equal weights: from a 25 % worse release to five times.
    public static let alternatives: [Double] = [1.25, 1.5, 2, 3, 5]

    /// The false-halt bound; the test rejects once the e-value reaches `1 / alpha`.
    public let alpha: Double
    /// The strata with a product of their own, fixed at the start (the OS majors of the baseline's cells);
    /// cells of other strata count in the pooled product only.
    public let strata: [String]
    /// `log` of each alternative's running product over every cell.
    private var pooled: [Double]
    /// `log` of each alternative's running product over the cells of each of `strata`.
    private var byStratum: [String: [Double]]
    public private(set) var cells = 0

    public init(alpha: Double = 0.01, strata: [String] = []) {
        precondition(alpha > 0 && alpha < 1, "alpha must be in (0, 1)")
        self.alpha = alpha
        self.strata = Array(Set(strata)).sorted()
        let ones = [Double](repeating: 0, count: Self.alternatives.count)
        pooled = ones
        byStratum = Dictionary(uniqueKeysWithValues: self.strata.map { ($0, ones) })
    }

    /// The installs of a cell, and how many of them reported an abnormal exit (at most `installs`).
    public struct Counts: Sendable, Equatable {
        public private(set) var installs: Int
        public private(set) var exits: Int

        public init(installs: Int, exits: Int) {
            self.installs = max(0, installs)
            self.exits = min(max(0, exits), self.installs)
        }
    }

    /// Takes one matched cell of `stratum` in. A cell without exits, or with no installs on either side,
    /// says nothing and leaves the e-value as it was.
    public mutating func observe(stratum: String, candidate: Counts, baseline: Counts) {
        cells += 1
        let total = candidate.exits + baseline.exits
        let low = max(0, total - baseline.installs)
        let high = min(candidate.installs, total)
        guard total > 0, low < high else { return }
        // log h(x): the central hypergeometric weights of x exits of R among `total`.
        let weights = (low...high).map { Self.logChoose(candidate.installs, $0) + Self.logChoose(baseline.installs, total - $0) }
        let logNull = Self.logSumExp(weights)
        for (index, psi) in Self.alternatives.enumerated() {
            let logPsi = Foundation.log(psi)
            let logAlternative = Self.logSumExp(weights.enumerated().map { $0.element + Double(low + $0.offset) * logPsi })
            let logRatio = Double(candidate.exits) * logPsi + logNull - logAlternative
            pooled[index] += logRatio
            byStratum[stratum]?[index] += logRatio
        }
    }

    /// The mixture's e-value: large when R's exits are worse than the baseline's, 1 before any evidence.
    public var eValue: Double { Foundation.exp(logEValue) }

    /// `log` of ``eValue``, exact where `eValue` would overflow.
    public var logEValue: Double {
        guard !strata.isEmpty else { return Self.logMean(pooled) }
        let half = Foundation.log(0.5)
        let share = half - Foundation.log(Double(strata.count))
        return Self.logSumExp([half + Self.logMean(pooled)] + strata.map { share + Self.logMean(byStratum[$0]!) })
    }

    /// Whether the evidence reached `1 / alpha`: R is worse than its baseline.
    public var rejects: Bool { logEValue >= -Foundation.log(alpha) }

    private static func logMean(_ logValues: [Double]) -> Double {
        logSumExp(logValues) - Foundation.log(Double(logValues.count))
    }

    static func logChoose(_ n: Int, _ k: Int) -> Double {
        lgamma(Double(n + 1)) - lgamma(Double(k + 1)) - lgamma(Double(n - k + 1))
    }

    static func logSumExp(_ values: [Double]) -> Double {
        guard let top = values.max(), top > -.infinity else { return -.infinity }
        return top + Foundation.log(values.reduce(0) { $0 + Foundation.exp($1 - top) })
    }
}
