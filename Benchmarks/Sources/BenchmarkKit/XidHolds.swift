/// The samples of the transaction-id sampler (`scripts/bench.d/projections-xids.sql`): every 200 ms, one
/// line per session of the bench database that holds a transaction id,
///
///     epoch s|pid|xid|query
///
/// A transaction holds its id from its first write to its end, and meanwhile holds back the feed of every
/// projection (docs/ARCHITECTURE.md, "The horizon is cluster-wide"). A hold is seen from its first sample
/// to its last: its length is at most one sampling period more than measured, and a hold shorter than a
/// period may go unseen.
public struct XidHold: Sendable, Equatable {
    public var pid: Int
    public var xid: String
    public var first: Double
    public var last: Double
    /// The session's statement when the hold was last seen, shortened.
    public var query: String

    public var seconds: Double { last - first }

    /// The holds in `output`, longest first.
    public static func parse(_ output: String) -> [XidHold] {
        var holds: [String: XidHold] = [:]
        for row in PsqlOutput(parsing: output).rows where row.count >= 3 {
            guard let epoch = Double(row[0]), let pid = Int(row[1]), !row[2].isEmpty else { continue }
            let key = "\(pid) \(row[2])"
            let query = row.count > 3 ? row[3...].joined(separator: "|") : ""
            if var hold = holds[key] {
                hold.first = min(hold.first, epoch)
                if epoch >= hold.last {
                    hold.last = epoch
                    hold.query = query
                }
                holds[key] = hold
            } else {
                holds[key] = XidHold(pid: pid, xid: row[2], first: epoch, last: epoch, query: query)
            }
        }
        return holds.values.sorted { ($0.seconds, $0.first) > ($1.seconds, $1.first) }
    }

    /// The longest of `holds` that overlaps [start, end] (Unix seconds), nil when none does.
    public static func longest(_ holds: [XidHold], from start: Double, to end: Double) -> XidHold? {
        holds.filter { $0.last >= start && $0.first <= end }.max { $0.seconds < $1.seconds }
    }
}
