/// Sizes transactions by time, so that each holds a transaction id about `target` (docs/ARCHITECTURE.md,
/// "The horizon is cluster-wide"): a batch of the projection runner, a write of a catch-up's step.
///
/// The next size follows the slowest rate (time per row) of the last ``window`` writes, not the last
/// one alone: on a busy machine one quick write is as often luck as a lasting change, and doubling on
/// it risks the next write taking several times the target when the luck ends. It grows at most
/// twofold from one write to the next, and stays between 100 rows and `maximum`.
public struct WriteSizer: Sendable {
    /// Rows of the first write.
    public static let first = 1_000
    /// How many recent writes the rate is taken over.
    public static let window = 8

    public let maximum: Int
    /// Rows of the next write.
    public private(set) var rows: Int
    /// Seconds per row of the last writes, the newest last.
    private var rates: [Double] = []

    public init(maximum: Int) {
        self.maximum = maximum
        rows = min(maximum, Self.first)
    }

    /// After a write of `written` rows that took `took`: sizes the next to take about `target`.
    public mutating func record(rows written: Int, took: Duration, target: Duration) {
        let seconds = Self.seconds(took)
        if written > 0, seconds > 0 {
            rates.append(seconds / Double(written))
            if rates.count > Self.window { rates.removeFirst(rates.count - Self.window) }
        }
        let grown = 2 * Double(max(written, 1))
        let next = rates.max().map { min(grown, Self.seconds(target) / $0) } ?? grown
        rows = max(min(100, maximum), min(maximum, next.isFinite ? Int(next) : maximum))
    }

    private static func seconds(_ duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
