import Foundation
import Hummingbird
import Metrics
import NIOCore
import Synchronization

/// Token buckets per client (an address, or a key): `rate` tokens per second on average, at most `burst`
/// at once; a rate of 0 turns the limiter off. The table holds at most `capacity` clients and forgets the
/// least recently seen one to make room (O(1), never a scan under the lock); a client forgotten that way
/// starts again with a full bucket.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let rate: Double
    let burst: Double
    private let buckets: Mutex<LRUTable<String, Bucket>>
    /// `upshift_rate_limited_total{limit=<name>}`: the requests this limit refused.
    private let refusals: Counter

    /// `name` labels the refusals (`check`, `events_client`, `events_key`, `sign_in`, `dashboard`).
    init(_ limit: RateLimit, name: String, metrics: any MetricsFactory, capacity: Int = 100_000) {
        rate = limit.rate
        burst = max(limit.burst, 1)
        buckets = Mutex(LRUTable(capacity: capacity))
        refusals = Counter(label: "upshift_rate_limited_total", dimensions: [("limit", name)], factory: metrics)
    }

    var isOn: Bool { rate > 0 }

    /// Takes `cost` tokens for `client`, all or none: nil when taken, else the seconds until they are
    /// there (at least 1).
    func acquire(_ client: String, cost: Double = 1) -> Int? {
        guard rate > 0 else { return nil }
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            var bucket = buckets.value(for: client) ?? Bucket(tokens: burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * rate)
            bucket.updated = now
            var wait: Int?
            if bucket.tokens >= cost {
                bucket.tokens -= cost
            } else {
                // Capped: a cost above the burst is never there; a day is as good as never for Retry-After.
                let seconds = min((min(cost, burst) - bucket.tokens) / rate, 86_400)
                wait = max(1, Int(seconds.rounded(.up)))
            }
            buckets.set(bucket, for: client)
            return wait
        }
    }

    /// Takes `cost` tokens for `client`, or throws `429` with `Retry-After` and `detail` (counting the
    /// refusal).
    func enforce(_ client: String, cost: Double = 1, detail: @autoclosure () -> String) throws {
        guard let retryAfter = acquire(client, cost: cost) else { return }
        refusals.increment()
        throw ProblemDetails.rateLimited(detail(), retryAfter: retryAfter)
    }
}

extension RateLimiter {
    /// Gives back `cost` tokens taken from `client` (a request that another limit then refused), up to
    /// the burst.
    func refund(_ client: String, cost: Double) {
        guard rate > 0 else { return }
        buckets.withLock { buckets in
            buckets.update(client) { $0.tokens = min(burst, $0.tokens + cost) }
        }
    }
}

/// A rate and a burst, as configured.
public struct RateLimit: Sendable, Equatable {
    /// Tokens per second (0: no limit).
    public var rate: Double
    /// Tokens at most at once.
    public var burst: Double

    public init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = burst
    }
}

/// Takes `cost` tokens from the bucket of the request's client address before the route reads anything
/// but the head (`429` with `Retry-After` when empty): the check, the events, the dashboard's sign-in
/// and session look-ups.
struct ClientRateLimit: RouterMiddleware {
    typealias Context = UpshiftRequestContext
    let limiter: RateLimiter
    let trustedProxies: Set<String>
    /// Why, for the problem's detail.
    let detail: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        if limiter.isOn {
            let client = ClientAddress.of(request, context, trustedProxies: trustedProxies)
            try limiter.enforce(client, detail: detail)
        }
        return try await next(request, context)
    }
}
