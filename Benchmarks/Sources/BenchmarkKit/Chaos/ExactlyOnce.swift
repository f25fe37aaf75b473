import Foundation

/// Every event acknowledged with `200` is stored exactly once, by event id. An event the
/// server acknowledged is one whose result in a `200` answer said `accepted` or `duplicate`, for any of
/// the attempts that carried it (the first, a resend, a retry).
///
/// Events sent but never acknowledged (their answer lost to a SIGKILL, a `503`) may be stored once or not
/// at all; no event may be stored twice, and nothing may be stored that the run did not send. A result
/// `rejected` for one of the run's events (all valid, resent unchanged) is a failure too: it would mean a
/// resend was taken for a conflicting event.
public struct ExactlyOnce: Sendable, Equatable {
    public let acknowledged: Int
    public let storedOnce: Int
    /// Acknowledged, not in the log.
    public let missing: [UUID]
    /// Stored under one id more than once.
    public let storedMoreThanOnce: [UUID]
    /// In the log, never sent by the run.
    public let neverSent: [UUID]
    /// Sent, never acknowledged, and stored (once): their answer was lost or was not `200`.
    public let storedUnacknowledged: Int
    public let sentUnacknowledged: Int
    public let sent: Int
    /// Results `rejected` in `200` answers, by their error ("unknown_type type").
    public let rejected: OutcomeCounts

    /// `stored`: rows of `event_log` by event id, for the run's app, without the server's `checked` events.
    public init(sent: Set<UUID>, acknowledged: Set<UUID>, stored: [UUID: Int], rejected: OutcomeCounts = OutcomeCounts()) {
        self.sent = sent.count
        self.acknowledged = acknowledged.count
        self.rejected = rejected
        var storedOnce = 0, missing: [UUID] = []
        for id in acknowledged {
            switch stored[id] ?? 0 {
            case 0: missing.append(id)
            case 1: storedOnce += 1
            default: break
            }
        }
        self.storedOnce = storedOnce
        self.missing = missing.sorted { $0.uuidString < $1.uuidString }
        storedMoreThanOnce = stored.filter { $0.value > 1 }.map(\.key).sorted { $0.uuidString < $1.uuidString }
        neverSent = stored.keys.filter { !sent.contains($0) }.sorted { $0.uuidString < $1.uuidString }
        let unacknowledged = sent.subtracting(acknowledged)
        sentUnacknowledged = unacknowledged.count
        storedUnacknowledged = unacknowledged.filter { stored[$0] == 1 }.count
    }

    public var holds: Bool {
        acknowledged > 0 && missing.isEmpty && storedMoreThanOnce.isEmpty && neverSent.isEmpty && rejected.total == 0
    }
}
