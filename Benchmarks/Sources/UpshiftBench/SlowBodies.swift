import BenchmarkKit
import Foundation

/// The greedy side of `scripts/bench memory`: many connections that each post one body slowly, as a
/// client on a bad network, or one that means harm, does with the public ingest key. Each connection
/// sends its request head at once and then the body in equal parts spread over `spread` seconds; when it
/// gets an answer (a refusal comes before the body is read), it closes and connects again after
/// `Retry-After` (1 s without one), so that the offer stays at `connections` for the whole run.
///
/// One thread drives every socket with `poll(2)` (non-blocking sockets; 2,000 threads would measure the
/// load generator). Each connection names a client address of its own in `X-Forwarded-For` (the server
/// trusts 127.0.0.1 as a proxy), as many devices would.
final class SlowBodies: @unchecked Sendable {
    struct Settings {
        var port: Int
        var connections: Int
        /// The request head, up to and including the blank line: everything but `X-Forwarded-For`, which
        /// is added per connection, and the final CRLF.
        var head: String
        var body: [UInt8]
        var spread: Double
        var duration: Double
    }

    /// What the run saw.
    struct Outcome {
        var attempts = 0
        /// Bodies sent to their last byte.
        var bodiesSent = 0
        /// Answers by status ("503" ...), and connections that ended with none ("closed", "reset").
        var answers: [String: Int] = [:]
        /// The most connections with their body fully sent and no answer yet, at one moment.
        var mostHeld = 0
    }

    private enum Phase {
        case waiting(until: Double)
        case connecting
        /// Parts of the body sent so far + 1; past `parts`, the whole body is sent and the answer awaited.
        case sending(part: Int)
    }

    private struct Connection {
        var socket: Int32 = -1
        var phase: Phase = .waiting(until: 0)
        var pending: [UInt8] = []
        var nextPartAt = 0.0
        var received: [UInt8] = []
        var retryAfter = 1.0
    }

    let settings: Settings
    private var connections: [Connection]
    private var outcome = Outcome()
    private let parts = 20

    init(_ settings: Settings) {
        self.settings = settings
        // Staggered over the first second, so that the heads do not all arrive in one burst.
        connections = (0..<settings.connections).map { index in
            Connection(phase: .waiting(until: Double(index) / Double(max(1, settings.connections))))
        }
    }

    /// Drives the connections for `settings.duration` seconds (on the calling thread), then closes them.
    func run() throws -> Outcome {
        signal(SIGPIPE, SIG_IGN)
        let start = Self.now()
        while Self.now() - start < settings.duration {
            let now = Self.now() - start
            for index in connections.indices { advance(index, now: now) }
            try poll(now: now)
            let held = connections.filter { if case .sending(let part) = $0.phase { part > parts } else { false } }.count
            outcome.mostHeld = max(outcome.mostHeld, held)
        }
        for index in connections.indices where connections[index].socket >= 0 { close(connections[index].socket) }
        return outcome
    }

    private static func now() -> Double { Double(DispatchTime.now().uptimeNanoseconds) / 1e9 }

    /// The request head of connection `index`, with its client address.
    private func head(_ index: Int) -> [UInt8] {
        let address = "10.\(index / 65_536 % 256).\(index / 256 % 256).\(index % 256)"
        return Array((settings.head + "X-Forwarded-For: \(address)\r\n\r\n").utf8)
    }

    private func advance(_ index: Int, now: Double) {
        switch connections[index].phase {
        case .waiting(let until) where now >= until:
            open(index, now: now)
        case .sending(let part) where part <= parts && now >= connections[index].nextPartAt:
            let body = settings.body
            let from = body.count * (part - 1) / parts, to = body.count * part / parts
            connections[index].pending += body[from..<to]
            connections[index].phase = .sending(part: part + 1)
            connections[index].nextPartAt = now + settings.spread / Double(parts)
            flush(index, now: now)
            if part == parts { outcome.bodiesSent += 1 }
        default:
            break
        }
    }

    private func open(_ index: Int, now: Double) {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else {
            outcome.answers["socket() failed", default: 0] += 1
            connections[index].phase = .waiting(until: now + 1)
            return
        }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(settings.port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 || errno == EINPROGRESS else {
            close(fd)
            outcome.answers["connect failed", default: 0] += 1
            connections[index].phase = .waiting(until: now + 1)
            return
        }
        outcome.attempts += 1
        connections[index] = Connection(socket: fd, phase: .connecting, pending: head(index))
    }

    /// Writes what connection `index` has pending, as far as the socket takes it.
    private func flush(_ index: Int, now: Double) {
        let fd = connections[index].socket
        while !connections[index].pending.isEmpty {
            let written = connections[index].pending.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if written > 0 {
                connections[index].pending.removeFirst(written)
            } else {
                if written < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
                end(index, as: "reset while sending", now: now)
                return
            }
        }
    }

    private func poll(now: Double) throws {
        var descriptors: [pollfd] = []
        var owners: [Int] = []
        for (index, connection) in connections.enumerated() where connection.socket >= 0 {
            var events = Int16(POLLIN)
            if case .connecting = connection.phase { events |= Int16(POLLOUT) }
            if !connection.pending.isEmpty { events |= Int16(POLLOUT) }
            descriptors.append(pollfd(fd: connection.socket, events: events, revents: 0))
            owners.append(index)
        }
        let ready = descriptors.withUnsafeMutableBufferPointer { Glibc.poll($0.baseAddress, nfds_t($0.count), 20) }
        guard ready > 0 else { return }
        for (slot, descriptor) in descriptors.enumerated() where descriptor.revents != 0 {
            let index = owners[slot]
            if case .connecting = connections[index].phase, descriptor.revents & Int16(POLLOUT) != 0 {
                var error: Int32 = 0
                var length = socklen_t(MemoryLayout<Int32>.size)
                getsockopt(connections[index].socket, SOL_SOCKET, SO_ERROR, &error, &length)
                guard error == 0 else {
                    end(index, as: "connect failed", now: now)
                    continue
                }
                connections[index].phase = .sending(part: 1)
                connections[index].nextPartAt = now
            }
            if descriptor.revents & Int16(POLLOUT) != 0 { flush(index, now: now) }
            if descriptor.revents & Int16(POLLIN | POLLHUP | POLLERR) != 0 { read(index, now: now) }
        }
    }

    /// Reads an answer: its status line is enough. A refusal comes before the body was sent.
    private func read(_ index: Int, now: Double) {
        guard connections[index].socket >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 4096)
        let count = buffer.withUnsafeMutableBytes { recv(connections[index].socket, $0.baseAddress, $0.count, 0) }
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK { return }
        guard count > 0 else {
            end(index, as: count == 0 ? "closed without an answer" : "reset", now: now)
            return
        }
        connections[index].received += buffer[0..<count]
        let text = String(decoding: connections[index].received, as: UTF8.self)
        guard let headEnd = text.range(of: "\r\n\r\n") else { return }
        let head = text[..<headEnd.lowerBound]
        let status = head.split(separator: " ").dropFirst().first.map(String.init) ?? "unreadable"
        if let line = head.split(separator: "\r\n").first(where: { $0.lowercased().hasPrefix("retry-after:") }),
           let seconds = Double(line.split(separator: ":").last?.trimmingCharacters(in: .whitespaces) ?? "")
        {
            connections[index].retryAfter = seconds
        }
        end(index, as: status, now: now)
    }

    private func end(_ index: Int, as what: String, now: Double) {
        outcome.answers[what, default: 0] += 1
        if connections[index].socket >= 0 { close(connections[index].socket) }
        connections[index] = Connection(phase: .waiting(until: now + connections[index].retryAfter))
    }
}
