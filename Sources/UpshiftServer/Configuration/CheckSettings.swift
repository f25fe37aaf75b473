/// How the check endpoint protects itself.
public struct CheckSettings: Sendable {
    /// Checks per second per client address (a rate of 0 turns the limit off), and the burst.
    public var ratePerClient = RateLimit(rate: 20, burst: 60)
    /// `checked` events waiting to be written beyond this are dropped (and counted).
    public var observationBuffer = 100_000
    /// The check-answer cache's budget, keys and bodies counted (`UPSHIFT_CHECK_CACHE_BYTES`).
    public var cacheBytes = 64 << 20

    public init() {}
}
