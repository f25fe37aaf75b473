import Foundation
import Synchronization

/// A token bucket per client address: `rate` requests per second on average, bursts up to `burst`.
/// A rate of 0 turns it off. Buckets that have refilled are forgotten when the table grows large, so
/// memory stays bounded whatever the number of clients.
final class RateLimiter: Sendable {
    private struct Bucket {
        var tokens: Double
        var updated: ContinuousClock.Instant
    }

    let rate: Double
    let burst: Double
    private let buckets = Mutex<[String: Bucket]>([:])
    private static let pruneAbove = 100_000

    init(rate: Double, burst: Double) {
        self.rate = rate
        self.burst = max(burst, 1)
    }

    /// Takes a token for `client`; nil when allowed, else the seconds until one is available.
    func acquire(_ client: String) -> Int? {
        guard rate > 0 else { return nil }
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            var bucket = buckets[client] ?? Bucket(tokens: burst, updated: now)
            let elapsed = now - bucket.updated
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            bucket.tokens = min(burst, bucket.tokens + seconds * rate)
            bucket.updated = now
            defer {
                buckets[client] = bucket
                if buckets.count > Self.pruneAbove { prune(&buckets, now: now) }
            }
            if bucket.tokens >= 1 {
                bucket.tokens -= 1
                return nil
            }
            return max(1, Int(((1 - bucket.tokens) / rate).rounded(.up)))
        }
    }

    private func prune(_ buckets: inout [String: Bucket], now: ContinuousClock.Instant) {
        let full = Duration.seconds(burst / rate)
        buckets = buckets.filter { now - $0.value.updated < full }
    }
}

/// The address a request comes from: the TCP peer, or, when the peer is a trusted proxy, the
/// right-most address of `X-Forwarded-For` that is not itself a trusted proxy (DESIGN.md section 7).
enum ClientAddress {
    static func resolve(peer: String?, forwardedFor: String?, trustedProxies: Set<String>) -> String {
        let peer = peer ?? "unknown"
        guard trustedProxies.contains(peer), let forwardedFor else { return peer }
        let hops = forwardedFor.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        return hops.last { !trustedProxies.contains($0) } ?? hops.first ?? peer
    }
}
