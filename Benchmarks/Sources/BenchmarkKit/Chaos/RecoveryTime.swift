/// How long ingestion took to recover after PostgreSQL came back, without a restart of the server.
///
/// Only requests sent after PostgreSQL accepted connections again (`returned`) and answered before `end`
/// (the next fault, or the end of the load) count. Among them, in the order they were sent, the last one
/// that was not answered `2xx` marks the end of the outage as ingestion saw it; the recovery is the first
/// `2xx` answer to a request sent after that one, measured from `returned`. With no failure after
/// `returned`, it is the first `2xx` answer. No `2xx` after the last failure: not recovered (nil).
public enum RecoveryTime {
    public static func seconds(_ exchanges: [Exchange], returned: Double, end: Double) -> Double? {
        let counted = exchanges
            .filter { $0.endpoint == .events && $0.sentAt >= returned && $0.answeredAt <= end }
            .sorted { $0.sentAt < $1.sentAt }
        let afterLastFailure: ArraySlice<Exchange>
        if let last = counted.lastIndex(where: { !$0.isSuccess }) {
            afterLastFailure = counted[(last + 1)...]
        } else {
            afterLastFailure = counted[...]
        }
        return afterLastFailure.map(\.answeredAt).min().map { $0 - returned }
    }
}
