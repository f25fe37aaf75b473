import Foundation
import Hummingbird
import NIOCore

/// The client a request comes from, as rate limits count clients: the TCP peer, or, when the peer is a
/// trusted proxy, the right-most address of `X-Forwarded-For` that is not itself a trusted proxy
/// (docs/ARCHITECTURE.md, "Rate limit"). IPv6 clients count by their /64 (one subscriber's network),
/// IPv4-mapped IPv6 addresses as IPv4; a hop that is not an address counts as the one client `invalid`.
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
            // sockaddr_in6 (RFC 3493): family and port (4 bytes; length and family on BSD), flow
            // information (4), then the 16 bytes of the address.
            let bytes = withUnsafeBytes(of: v6.address) { Array($0[8..<24]) }
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
