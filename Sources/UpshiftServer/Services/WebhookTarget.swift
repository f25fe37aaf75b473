import Foundation
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where a webhook may be delivered (docs/OPERATIONS.md, "Webhooks"): an `https` URL (`http` too with
/// `UPSHIFT_WEBHOOK_ALLOW_HTTP`) whose host resolves only to addresses outside the refused ranges. The
/// worker checks at creation and at every delivery, and connects to the address it checked, so a name that
/// later resolves elsewhere (DNS rebinding) cannot reach a refused address.
struct WebhookTarget: Sendable, Equatable {
    let url: String
    let host: String
    /// The address checked, which the delivery connects to.
    let address: String

    /// The longest URL taken.
    static let maximumURLBytes = 2_048

    /// A URL or its host that may not be a target: why.
    struct Refused: Error, CustomStringConvertible {
        let description: String
    }

    /// The host of `text`, when it is a URL a subscription may name; the address is checked apart.
    static func host(of text: String, allowHTTP: Bool) throws(Refused) -> String {
        guard text.utf8.count <= maximumURLBytes else { throw Refused(description: "url is longer than \(maximumURLBytes) bytes") }
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            let host = components.host, !host.isEmpty
        else { throw Refused(description: "url must be an absolute URL such as https://hooks.example.com/upshift") }
        guard scheme == "https" || (scheme == "http" && allowHTTP) else {
            throw Refused(description: allowHTTP ? "url must be https or http" : "url must be https (http needs UPSHIFT_WEBHOOK_ALLOW_HTTP)")
        }
        guard components.user == nil, components.password == nil else {
            throw Refused(description: "url may not carry a user or password")
        }
        guard components.fragment == nil else { throw Refused(description: "url may not carry a fragment") }
        return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    /// Checks `text` and resolves its host with `resolve`: every address it gives must be allowed.
    static func check(
        _ text: String, allowHTTP: Bool, allowPrivate: Bool, resolve: @escaping @Sendable (String) async throws -> [String]
    ) async throws(Refused) -> WebhookTarget {
        let host = try host(of: text, allowHTTP: allowHTTP)
        let addresses: [String]
        if IPAddress(host) != nil {
            addresses = [host]
        } else {
            do {
                addresses = try await withThrowingTaskGroup(of: [String]?.self) { group in
                    group.addTask { try await resolve(host) }
                    group.addTask {
                        try await Task.sleep(for: resolveTimeout)
                        return nil
                    }
                    defer { group.cancelAll() }
                    guard let first = try await group.next(), let found = first else { throw Refused(description: "") }
                    return found
                }
            } catch {
                throw Refused(description: "url's host \(host) does not resolve (within \(resolveTimeout))")
            }
        }
        guard !addresses.isEmpty else { throw Refused(description: "url's host \(host) does not resolve") }
        for address in addresses {
            guard let ip = IPAddress(address) else { throw Refused(description: "url's host \(host) resolves to \(address)") }
            if let range = ip.refusedRange(allowPrivate: allowPrivate) {
                throw Refused(description: "url's host \(host) resolves to \(address), a \(range) address")
            }
        }
        return WebhookTarget(url: text, host: host, address: addresses[0])
    }

    /// How long a host name may take to resolve.
    static let resolveTimeout: Duration = .seconds(5)

    /// Threads of their own for lookups, which block: a slow resolver holds these, nothing else.
    private static let lookups: NIOThreadPool = {
        let pool = NIOThreadPool(numberOfThreads: 2)
        pool.start()
        return pool
    }()

    /// The system's resolver (getaddrinfo, on threads of its own): every address of `host`, as text.
    @Sendable static func systemResolve(_ host: String) async throws -> [String] {
        try await lookups.runIfActive {
            var hints = addrinfo()
            hints.ai_family = AF_UNSPEC
            #if canImport(Glibc)
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            #else
            hints.ai_socktype = SOCK_STREAM
            #endif
            var list: UnsafeMutablePointer<addrinfo>?
            let status = getaddrinfo(host, nil, &hints, &list)
            guard status == 0, let first = list else { throw Refused(description: "\(host) does not resolve") }
            defer { freeaddrinfo(first) }
            var addresses: [String] = []
            var next: UnsafeMutablePointer<addrinfo>? = first
            while let entry = next {
                var text = [CChar](repeating: 0, count: Int(NI_MAXHOST))
                if let address = entry.pointee.ai_addr,
                    getnameinfo(address, entry.pointee.ai_addrlen, &text, socklen_t(text.count), nil, 0, NI_NUMERICHOST) == 0
                {
                    let value = String(cString: text)
                    if !addresses.contains(value) { addresses.append(value) }
                }
                next = entry.pointee.ai_next
            }
            return addresses
        }
    }
}

/// An IPv4 or IPv6 address as its bytes (4 or 16).
struct IPAddress: Sendable {
    let bytes: [UInt8]

    init?(_ text: String) {
        // A zone (`fe80::1%eth0`) names a link: such an address is link-local anyway.
        let plain = text.split(separator: "%", maxSplits: 1).first.map(String.init) ?? text
        var v4 = in_addr()
        var v6 = in6_addr()
        if inet_pton(AF_INET, plain, &v4) == 1 {
            bytes = withUnsafeBytes(of: &v4) { Array($0) }
        } else if inet_pton(AF_INET6, plain, &v6) == 1 {
            bytes = withUnsafeBytes(of: &v6) { Array($0) }
        } else {
            return nil
        }
    }

    /// The name of the range this address lies in when a webhook may not reach it; nil when it may.
    /// Private ranges and loopback are allowed with `allowPrivate`; link-local (where clouds answer
    /// metadata requests), unspecified, multicast, reserved and IPv4-mapped or -compatible forms never are.
    func refusedRange(allowPrivate: Bool) -> String? {
        let never: String?
        let privateRange: String?
        if bytes.count == 4 {
            let (a, b) = (bytes[0], bytes[1])
            never =
                a == 0 ? "unspecified" : (a == 169 && b == 254) ? "link-local" : (a >= 224 && a <= 239) ? "multicast"
                : a >= 240 ? "reserved" : nil
            privateRange =
                a == 127 ? "loopback" : a == 10 || (a == 172 && b & 0xF0 == 16) || (a == 192 && b == 168) ? "private"
                : (a == 100 && b & 0xC0 == 64) ? "shared (100.64/10)" : nil
        } else {
            let zeroPrefix = bytes[0..<10].allSatisfy { $0 == 0 }
            let mapped = zeroPrefix && bytes[10] == 0xFF && bytes[11] == 0xFF
            let compatible = bytes[0..<12].allSatisfy { $0 == 0 }
            let loopback = compatible && bytes[12..<15].allSatisfy { $0 == 0 } && bytes[15] == 1
            let unspecified = bytes.allSatisfy { $0 == 0 }
            never =
                unspecified ? "unspecified" : mapped ? "IPv4-mapped" : (compatible && !loopback) ? "IPv4-compatible"
                : (bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80) ? "link-local" : bytes[0] == 0xFF ? "multicast" : nil
            privateRange = loopback ? "loopback" : bytes[0] & 0xFE == 0xFC ? "private (fc00::/7)" : nil
        }
        if let never { return never }
        if let privateRange, !allowPrivate { return privateRange }
        return nil
    }
}
