import Foundation

/// An IP-level black hole (nftables): every packet to or from one local address and port is dropped,
/// in both directions, as on a host that vanished or behind a partition. Nothing answers, not even a
/// kernel's TCP keepalive, which a userspace proxy would still answer. Needs `nft` (Debian's `nftables`)
/// and the right to change the ruleset (root, as CI runs); without either, ``drop(address:port:)``
/// throws naming what is missing.
public struct BlackHole: Sendable {
    public let table: String

    /// Drops every packet between any local socket and `address:port` (the server side), whichever way it goes.
    public static func drop(address: String, port: Int) async throws -> BlackHole {
        let nft = try tool()
        let hole = BlackHole(table: "upshift_black_hole_\(port)")
        _ = try? await run(nft, ["delete", "table", "inet", hole.table])
        do {
            try await run(nft, ["add", "table", "inet", hole.table])
            try await run(nft, ["add", "chain", "inet", hole.table, "out", "{ type filter hook output priority 0 ; policy accept ; }"])
            try await run(nft, ["add", "rule", "inet", hole.table, "out", "ip", "daddr", address, "tcp", "dport", String(port), "drop"])
            try await run(nft, ["add", "rule", "inet", hole.table, "out", "ip", "saddr", address, "tcp", "sport", String(port), "drop"])
        } catch {
            _ = try? await run(nft, ["delete", "table", "inet", hole.table])
            throw TestEnvironment.Missing(
                description: "cannot change the nftables ruleset (the black hole needs root or CAP_NET_ADMIN): \(error)")
        }
        return hole
    }

    /// Lets traffic flow again.
    public func lift() async throws {
        try await Self.run(try Self.tool(), ["delete", "table", "inet", table])
    }

    public static func tool() throws -> String {
        for path in ["/usr/sbin/nft", "/sbin/nft", "/usr/bin/nft"] where FileManager.default.isExecutableFile(atPath: path) {
            return path
        }
        throw TestEnvironment.Missing(
            description: "nft is missing: install Debian's nftables package (scripts/test does); the host-loss test drops "
                + "packets at the IP level and cannot run without it")
    }

    @discardableResult
    static func run(_ program: String, _ arguments: [String]) async throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        let status = try await process.runToEnd()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        guard status == 0 else {
            throw TestEnvironment.Missing(description: "\(([program] + arguments).joined(separator: " ")) exited \(status): \(text)")
        }
        return text
    }
}
