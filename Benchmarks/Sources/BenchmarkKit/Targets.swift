/// One performance target (docs/BENCHMARKS.md, "Performance targets"): a bound on a measured value.
public struct Target: Sendable, Equatable {
    public enum Comparison: Sendable, Equatable {
        case atLeast
        case atMost

        var symbol: String { self == .atLeast ? ">=" : "<=" }
    }

    /// What the bound counts.
    public enum Unit: Sendable, Equatable {
        /// Upshift's figure over its reference's, measured in the same run.
        case ratio
        case milliseconds
        case seconds
        case eventsPerSecond
        /// Decimal megabytes, as the memory target writes "200 MB".
        case megabytes
    }

    public let comparison: Comparison
    public let bound: Double
    public let unit: Unit
    /// "p99", "p95", or nil when the value is not a percentile.
    public let statistic: String?
    /// The first cell of the row of the performance targets this target comes from (docs/BENCHMARKS.md,
    /// "Performance targets"); `TargetsTests` finds the same row in the contract's table.
    public let designRow: String
    /// Its words in that row ("≥ 60%", "p99 ≤ 5 ms"), so that a test can hold the two side by side.
    public let designWords: String

    public init(
        _ comparison: Comparison, _ bound: Double, _ unit: Unit, statistic: String? = nil,
        designRow: String, designWords: String
    ) {
        self.comparison = comparison
        self.bound = bound
        self.unit = unit
        self.statistic = statistic
        self.designRow = designRow
        self.designWords = designWords
    }

    /// Whether `value` (in the target's unit) meets the bound.
    public func isMet(by value: Double) -> Bool {
        comparison == .atLeast ? value >= bound : value <= bound
    }

    /// The bound as the summaries print it: ">= 0.60", "<= 5 ms", ">= 50,000 events/s".
    public var boundText: String {
        let number: String
        switch unit {
        case .ratio: number = Format.fixed(bound, 2)
        case .milliseconds: number = Format.fixed(bound, 0) + " ms"
        case .seconds: number = Format.fixed(bound, 0) + " s"
        case .eventsPerSecond: number = Format.grouped(bound) + " events/s"
        case .megabytes: number = Format.fixed(bound, 0) + " MB"
        }
        return comparison.symbol + " " + number
    }

    /// The bound with its statistic: "p99 <= 1 s".
    public var text: String {
        statistic.map { $0 + " " + boundText } ?? boundText
    }
}

/// The performance targets (docs/BENCHMARKS.md, "Performance targets"), the one table every summary
/// takes its bounds from (BenchmarkKitTests checks it against the contract's own table).
public enum Targets {
    /// Check without `install`: requests/s against the trivial Hummingbird route with the same bytes.
    public static let checkAgainstTrivialRoute = Target(
        .atLeast, 0.90, .ratio, designRow: "check endpoint, no `install`", designWords: "≥ 90%")
    /// Check without `install`: requests/s against nginx serving the bytes as a static file.
    public static let checkAgainstNginx = Target(
        .atLeast, 0.45, .ratio, designRow: "check endpoint, no `install`", designWords: "≥ 45% of nginx")
    /// Check with a distinct `install` per request: requests/s against the trivial route.
    public static let checkWithInstallAgainstTrivialRoute = Target(
        .atLeast, 0.50, .ratio, designRow: "check endpoint, a distinct `install` per request", designWords: "≥ 50%")
    /// Check latency at half the maximum rate, paced.
    public static let checkPacedLatency = Target(
        .atMost, 5, .milliseconds, statistic: "p99", designRow: "check latency", designWords: "p99 ≤ 5 ms")
    /// POST /v1/events with 100 events per request: rows/s against a raw batched `INSERT ... SELECT unnest`.
    public static let ingestBatchAgainstUnnest = Target(
        .atLeast, 0.60, .ratio, designRow: "ingestion, 100 events per request", designWords: "≥ 60%")
    /// POST /v1/events with 1 event per request: rows/s against pgbench's one row per transaction.
    public static let ingestSingleAgainstPgbench = Target(
        .atLeast, 1.00, .ratio, designRow: "ingestion, 1 event per request", designWords: "≥ the transactions/s")
    public static let catchUp = Target(
        .atLeast, 50_000, .eventsPerSecond, designRow: "projection catch-up", designWords: "≥ 50,000 events/s")
    public static let lag = Target(
        .atMost, 1, .seconds, statistic: "p99", designRow: "projection lag", designWords: "p99 ≤ 1 s")
    public static let adoptionReport = Target(
        .atMost, 50, .milliseconds, statistic: "p95", designRow: "reports", designWords: "p95 ≤ 50 ms")
    /// Every report but adoption.
    public static let otherReports = Target(
        .atMost, 100, .milliseconds, statistic: "p95", designRow: "reports", designWords: "p95 ≤ 100 ms")
    /// The policy backtest (`POST /v1/apps/{app}/preview`) of an app with 1 M installs (judged, as the
    /// reports are, in milliseconds).
    public static let backtest = Target(
        .atMost, 1000, .milliseconds, statistic: "p95", designRow: "backtest", designWords: "p95 ≤ 1 s")
    /// Ingestion (100 events per request) while one read token runs reports and backtests at its default
    /// limits, against ingestion alone: `scripts/bench ingest`, case (e) against (e0).
    public static let ingestionBesideReaders = Target(
        .atLeast, 0.80, .ratio, designRow: "ingestion beside readers", designWords: "≥ 80% of ingestion alone")
    /// Peak RSS of `upshift serve`.
    public static let memory = Target(.atMost, 200, .megabytes, designRow: "memory", designWords: "≤ 200 MB")

    public static let all: [Target] = [
        checkAgainstTrivialRoute, checkAgainstNginx, checkWithInstallAgainstTrivialRoute, checkPacedLatency,
        ingestBatchAgainstUnnest, ingestSingleAgainstPgbench, catchUp, lag, adoptionReport, otherReports, memory,
        ingestionBesideReaders, backtest,
    ]
}
