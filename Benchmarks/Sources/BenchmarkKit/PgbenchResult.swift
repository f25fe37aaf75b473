/// What pgbench printed at the end of a run (`scripts/bench ingest`, cases (a) and (c)).
public struct PgbenchResult: Sendable, Equatable {
    /// "tps = 1259.201350 (without initial connection time)"
    public var transactionsPerSecond: Double
    /// "number of failed transactions: 0 (0.000%)"; older pgbench versions print no such line: 0.
    public var failedTransactions: Int

    public init(transactionsPerSecond: Double, failedTransactions: Int) {
        self.transactionsPerSecond = transactionsPerSecond
        self.failedTransactions = failedTransactions
    }

    public init(parsing output: String) throws(BenchParseError) {
        var tps: Double?
        var failed = 0
        for line in output.split(separator: "\n") {
            if let rest = line.strippingPrefix("tps = ") {
                tps = Double(rest.prefix { $0.isNumber || $0 == "." })
            } else if let rest = line.strippingPrefix("number of failed transactions: ") {
                failed = Int(rest.prefix { $0.isNumber }) ?? failed
            }
        }
        guard let tps else { throw BenchParseError("pgbench printed no `tps = ` line") }
        transactionsPerSecond = tps
        failedTransactions = failed
    }
}

extension Substring {
    /// The rest after `prefix`, or nil when the line does not start with it.
    func strippingPrefix(_ prefix: String) -> Substring? {
        hasPrefix(prefix) ? dropFirst(prefix.count) : nil
    }
}
