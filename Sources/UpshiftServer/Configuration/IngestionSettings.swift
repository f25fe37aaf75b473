/// How the ingestion writer batches (group commit).
public struct IngestionSettings: Sendable {
    /// Flushes that may be in flight at once; each takes everything pending when it starts.
    public var concurrentFlushes = 3
    /// The most events one `INSERT` carries.
    public var maximumBatchEvents = 5_000
    /// Events waiting beyond this answer `503` at once (overload), rather than queueing without bound.
    public var maximumPendingEvents = 50_000
    /// How long one flush may take before its requests answer `503`.
    public var flushTimeout: Duration = .seconds(3)
    /// After a failed flush, requests answer `503` at once for this long (the database is down).
    public var failFastAfterError: Duration = .seconds(1)
    /// Events per second per client address (IPv6: per /64), and the burst (docs/OPERATIONS.md,
    /// "Security", shows the arithmetic): 1,000 installs behind one carrier-grade NAT address, each sending
    /// what the SDK sends at most.
    public var ratePerClient = RateLimit(rate: 100, burst: 10_000)
    /// Events per second per ingest key, and the burst: an app of 10 M installs.
    public var ratePerKey = RateLimit(rate: 10_000, burst: 100_000)

    public init() {}
}
