import Foundation
import Hummingbird
import NIOCore
import Synchronization
import UpshiftTestSupport

/// A stand-in for Apple's lookup API (`GET /lookup?bundleId=…`) that a test starts on loopback: each
/// bundle id answers as the test sets it, and every request is recorded.
final class FakeAppStore: Sendable {
    enum Answer: Sendable {
        /// `200` with this body.
        case json(String)
        /// This status with a short body.
        case status(Int)
        /// `200` with this body after a pause.
        case slow(Duration, String)
        /// `200` with `bytes` of JSON-looking text, with a `Content-Length` or streamed without one.
        case oversized(bytes: Int, declared: Bool)
        /// `200` with this body once the test calls ``letHeldAnswersGo()``.
        case held(String)
    }

    struct Request: Sendable {
        var bundleId: String?
        var entity: String?
        var at: ContinuousClock.Instant
    }

    private let state = Mutex<(answers: [String: Answer], requests: [Request])>(([:], []))
    private let holding = Mutex(true)
    let port: Int

    private init(port: Int) {
        self.port = port
    }

    var lookupURL: String { "http://127.0.0.1:\(port)/lookup" }

    func answer(_ bundleId: String, with answer: Answer) {
        state.withLock { $0.answers[bundleId] = answer }
    }

    /// Held answers go out now.
    func letHeldAnswersGo() {
        holding.withLock { $0 = false }
    }

    func requests(for bundleId: String) -> [Request] {
        state.withLock { $0.requests.filter { $0.bundleId == bundleId } }
    }

    /// Apple's answer for one app, as the lookup gives it (the fields the import reads and a few more).
    static func listing(
        bundleId: String, version: String, released: String = "2026-11-20T16:47:33Z", minimumOS: String? = "16.0",
        notes: String? = "Faster sync\n\nFixes a crash"
    ) -> String {
        var result: [String: Any] = [
            "kind": "software", "trackId": 1_234_567_890, "trackName": "Expenses", "bundleId": bundleId,
            "version": version, "currentVersionReleaseDate": released,
        ]
        result["minimumOsVersion"] = minimumOS
        result["releaseNotes"] = notes
        let data = try! JSONSerialization.data(withJSONObject: ["resultCount": 1, "results": [result]], options: [.sortedKeys])
        return String(decoding: data, as: UTF8.self)
    }

    static let empty = #"{"resultCount":0,"results":[]}"#

    /// Runs a store for the duration of `body`.
    static func run<T: Sendable>(_ body: @Sendable (FakeAppStore) async throws -> T) async throws -> T {
        let holder = Mutex<FakeAppStore?>(nil)
        let router = Router()
        router.get("/lookup") { request, _ -> Response in
            guard let store = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let bundleId = request.uri.queryParameters.get("bundleId")
            let answer = store.state.withLock { state in
                state.requests.append(
                    Request(bundleId: bundleId, entity: request.uri.queryParameters.get("entity"), at: .now))
                return bundleId.flatMap { state.answers[$0] } ?? .json(FakeAppStore.empty)
            }
            if case .held = answer {
                while store.holding.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
            }
            return try await respond(answer)
        }
        return try await LoopbackServer.run(router, name: "the fake App Store") { port in
            let store = FakeAppStore(port: port)
            holder.withLock { $0 = store }
            return try await body(store)
        }
    }

    private static func respond(_ answer: Answer) async throws -> Response {
        let json: HTTPFields = [.contentType: "application/json"]
        switch answer {
        case .json(let body):
            return Response(status: .ok, headers: json, body: .init(byteBuffer: ByteBuffer(string: body)))
        case .status(let code):
            return Response(
                status: .init(code: code), headers: json, body: .init(byteBuffer: ByteBuffer(string: #"{"error":"x"}"#)))
        case .held(let body):
            return Response(status: .ok, headers: json, body: .init(byteBuffer: ByteBuffer(string: body)))
        case .slow(let pause, let body):
            try await Task.sleep(for: pause)
            return Response(status: .ok, headers: json, body: .init(byteBuffer: ByteBuffer(string: body)))
        case .oversized(let bytes, let declared):
            // A results array of one huge string: valid JSON once whole, never read that far.
            let chunk = ByteBuffer(repeating: UInt8(ascii: "a"), count: 64 << 10)
            let head = ByteBuffer(string: #"{"resultCount":1,"results":[""#)
            let tail = ByteBuffer(string: #""]}"#)
            let chunks = max(1, (bytes - head.readableBytes - tail.readableBytes) / chunk.readableBytes)
            let length = head.readableBytes + chunks * chunk.readableBytes + tail.readableBytes
            return Response(
                status: .ok, headers: json,
                body: ResponseBody(contentLength: declared ? length : nil) { writer in
                    try await writer.write(head)
                    for _ in 0..<chunks { try await writer.write(chunk) }
                    try await writer.write(tail)
                    try await writer.finish(nil)
                })
        }
    }
}
