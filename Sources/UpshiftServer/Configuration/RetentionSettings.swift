import Foundation

/// Retention of the event log (docs/OPERATIONS.md, "Retention"): `UPSHIFT_RETENTION_MONTHS` and
/// `UPSHIFT_EXPORT_DIR`; unset, the log keeps everything.
public struct RetentionSettings: Sendable {
    /// Whole months kept after the current one, at least 2: events up to 30 days old are still accepted.
    public var months: Int
    /// Where each month's archive is written before it is dropped (shared storage when several instances run).
    public var directory: URL
    /// How often the worker looks for months to drop (`UPSHIFT_RETENTION_INTERVAL`); a month whose export
    /// failed or that a projection has not passed yet is tried again then.
    public var interval: Duration = .seconds(86_400)
    /// Rows of `event_ids` per pruning transaction.
    public var pruneBatch = 10_000

    public static let minimumMonths = 2

    public init(months: Int, directory: URL) {
        self.months = months
        self.directory = directory
    }
}
