/// What the server answered while PostgreSQL was down: every check `200`, from the in-memory
/// catalog, and every `POST /v1/events` `503` with `Retry-After`, never a `500`.
///
/// An exchange counts when its answer arrived between the moment the run stopped PostgreSQL and the
/// moment PostgreSQL accepted connections again. A `200` of `/v1/events` in that window is allowed: its
/// `COMMIT` happened before the stop took effect, and the exactly-once proof checks that it is stored.
/// A window in which neither endpoint answered proves nothing and fails.
public struct OutageVerdict: Sendable, Equatable {
    public let down: Double
    public let up: Double
    public let checks: OutcomeCounts
    public let events: OutcomeCounts

    public static let allowedCheckOutcomes: Set<String> = ["200"]
    public static let allowedEventOutcomes: Set<String> = ["200", Exchange.unavailableWithRetryAfter]

    /// Seconds from the stop to the last `200` of `/v1/events` in the window (nil without one): a commit
    /// that raced the stop is answered within milliseconds.
    public let lastEventsSuccess: Double?

    public init(_ exchanges: [Exchange], down: Double, up: Double) {
        self.down = down
        self.up = up
        let inWindow = exchanges.filter { $0.answeredAt >= down && $0.answeredAt <= up }
        checks = OutcomeCounts(inWindow.filter { $0.endpoint == .check })
        events = OutcomeCounts(inWindow.filter { $0.endpoint == .events })
        lastEventsSuccess = inWindow.filter { $0.endpoint == .events && $0.isSuccess }.map(\.answeredAt).max().map { $0 - down }
    }

    /// Checks answered in the window, all of them `200`.
    public var checksHold: Bool {
        checks.total > 0 && checks.others(than: Self.allowedCheckOutcomes).isEmpty
    }

    /// `/v1/events` answered `503` with `Retry-After` at least once in the window, and nothing but that or `200`.
    public var eventsHold: Bool {
        events[Exchange.unavailableWithRetryAfter] > 0 && events.others(than: Self.allowedEventOutcomes).isEmpty
    }

    public var holds: Bool { checksHold && eventsHold }
}
