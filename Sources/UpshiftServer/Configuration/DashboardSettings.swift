/// How the dashboard protects itself.
public struct DashboardSettings: Sendable {
    /// Requests with a session cookie per second per client address, and the burst: each costs a
    /// database look-up, so a flood of made-up cookies is bounded like every other public input. A
    /// person reading pages stays far below it.
    public var ratePerClient = RateLimit(rate: 10, burst: 100)

    public init() {}
}
