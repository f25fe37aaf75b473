import Foundation
import Hummingbird
import NIOCore
import Prometheus
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

    init(_ limit: RateLimit, capacity: Int = 100_000) {
        rate = limit.rate
        burst = max(limit.burst, 1)
        buckets = Mutex(LRUTable(capacity: capacity))
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
    /// refusal in `refused`).
    func enforce(_ client: String, cost: Double = 1, refused: Prometheus.Counter? = nil, detail: @autoclosure () -> String) throws {
        guard let retryAfter = acquire(client, cost: cost) else { return }
        refused?.increment()
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

/// The client a request comes from, as rate limits count clients: the TCP peer, or, when the peer is a
/// trusted proxy, the right-most address of `X-Forwarded-For` that is not itself a trusted proxy
/// (DESIGN.md section 7). IPv6 clients count by their /64 (one subscriber's network), IPv4-mapped IPv6
/// addresses as IPv4; a hop that is not an address counts as the one client `invalid`.
enum ClientAddress {
    /// The client of `request`, as the rate limits count it.
    static func of(_ request: Request, _ context: UpshiftRequestContext, trustedProxies: Set<String>) -> String {
        resolve(
            peer: context.peer, forwardedFor: request.headers[values: .xForwardedFor].joined(separator: ","),
            trustedProxies: trustedProxies)
    }

    static func resolve(peer: SocketAddress?, forwardedFor: String?, trustedProxies: Set<String>) -> String {
        guard let peer, let peerText = peer.ipAddress else { return "unknown" }
        guard trustedProxies.contains(peerText), let forwardedFor else { return key(peer) }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard let hop = hops.last(where: { !trustedProxies.contains($0) }) ?? hops.first else { return key(peer) }
        guard hop.utf8.count <= 45, let address = try? SocketAddress(ipAddress: hop, port: 0) else { return "invalid" }
        return key(address)
    }

    /// `203.0.113.7`, or `2001:db8:1:2::/64`.
    static func key(_ address: SocketAddress) -> String {
        switch address {
        case .v6(let v6):
            let bytes = withUnsafeBytes(of: v6.address.sin6_addr) { Array($0) }
            // ::ffff:a.b.c.d is an IPv4 client.
            if bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xFF, bytes[11] == 0xFF {
                return bytes[12..<16].map(String.init).joined(separator: ".")
            }
            var groups: [String] = []
            for index in stride(from: 0, to: 8, by: 2) {
                groups.append(String(UInt16(bytes[index]) << 8 | UInt16(bytes[index + 1]), radix: 16))
            }
            return groups.joined(separator: ":") + "::/64"
        default:
            return address.ipAddress ?? "unknown"
        }
    }
}
