import CompressNIO
import Foundation
import NIOCore
import UpshiftClient
import UpshiftCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// URLSessions shared by the fleet, recording what the server accepted (events) and answered (checks, each stored by the
/// server as a `checked` event at the time of the check).
final class RecordingTransport: UpshiftTransport, @unchecked Sendable {
    /// Requests go round the sessions: on Linux one URLSession does its work on one serial queue.
    private let sessions = (0..<4).map { _ in URLSessionTransport() }
    private var sent = 0
    private let clock: SimulatedClock
    private let lock = NSLock()
    private var recorded: [Fact] = []
    private var recordedIds = Set<String>()
    private var accepted = 0

    init(clock: SimulatedClock) { self.clock = clock }

    var facts: [Fact] { lock.withLock { recorded } }
    /// Events the server took from the SDK.
    var acceptedCount: Int { lock.withLock { accepted } }
    /// Rows the server stores for this fleet: accepted events and answered checks.
    var storedCount: Int { lock.withLock { recorded.count } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let session = lock.withLock {
            sent += 1
            return sessions[sent % sessions.count]
        }
        let (data, response) = try await session.send(request)
        guard response.statusCode == 200, let url = request.url else { return (data, response) }
        if url.path.hasSuffix("/check") {
            let query = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems ?? []
            func item(_ name: String) -> String? { query.first { $0.name == name }?.value }
            if let install = item("install"), let version = item("version") {
                let at = clock.now()
                let answer = try? JSONValue.parse(data)
                let offered = answer?["action"]?.stringValue == "none" ? nil : answer?["latestVersion"]?.stringValue
                lock.withLock {
                    recorded.append(
                        Fact(install: install, at: at, version: version, type: "checked", order: recorded.count, offered: offered))
                }
            }
        } else if let body = Self.json(of: request),
            let sent = (try? JSONSerialization.jsonObject(with: body) as? [String: Any])?["events"] as? [[String: Any]],
            let reply = try? JSONDecoder().decode(IngestResponse.self, from: data)
        {
            lock.withLock {
                // A duplicate whose first copy was stored by a request that looked failed to the SDK
                // (and so was resent) is recorded on its first answer here.
                for result in reply.results where result.status != .rejected && result.index < sent.count {
                    let event = sent[result.index]
                    guard let id = event["id"] as? String, recordedIds.insert(id).inserted,
                        let install = event["installId"] as? String, let version = event["appVersion"] as? String,
                        let type = event["type"] as? String, let at = (event["occurredAt"] as? String).flatMap(Timestamp.parse)
                    else { continue }
                    accepted += 1
                    recorded.append(
                        Fact(
                            install: install, at: at, version: version, type: type, target: event["targetVersion"] as? String,
                            kind: type == "blocked" ? "force" : event["promptKind"] as? String,
                            action: event["dismissAction"] as? String, order: recorded.count))
                }
            }
        }
        return (data, response)
    }

    /// The JSON of an events request, decompressed when the SDK sent it gzipped (it always does).
    static func json(of request: URLRequest) -> Data? {
        guard let body = request.httpBody else { return nil }
        guard request.value(forHTTPHeaderField: "Content-Encoding") == "gzip" else { return body }
        var buffer = ByteBuffer(bytes: body)
        guard let plain = try? buffer.decompress(with: .gzip(), maxSize: 16 << 20) else { return nil }
        return Data(plain.readableBytesView)
    }
}
