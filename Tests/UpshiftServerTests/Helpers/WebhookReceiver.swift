import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import UpshiftTestSupport

/// A team's webhook receiver that a test starts on loopback: it records every POST to `/hook` (headers
/// and body) and answers each with the next status of its script, `200` once the script is used up, after
/// the next delay of its holds, if any. A `3xx` sends the sender back to `/hook` (a client that follows it
/// posts again); the answer's body is `ok`, or as many bytes as `answer(bytes:)` set.
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        var delivery: String?
        var signature: String?
        var contentType: String?
        var body: Data
    }

    private struct State {
        var script: [Int] = []
        var holds: [Duration] = []
        var answerBytes: Int?
        var received: [Received] = []
    }

    private let state = Mutex(State())
    let port: Int

    private init(port: Int) {
        self.port = port
    }

    /// Answers the next requests with these statuses, in order.
    func script(_ statuses: [Int]) {
        state.withLock { $0.script = statuses }
    }

    /// Holds the answers to the next requests this long each, in order.
    func hold(_ delays: [Duration]) {
        state.withLock { $0.holds = delays }
    }

    /// Answers with a body of this many bytes from now on.
    func answer(bytes: Int) {
        state.withLock { $0.answerBytes = bytes }
    }

    var received: [Received] { state.withLock { $0.received } }

    /// Waits until `count` requests have arrived.
    func waitFor(_ count: Int, timeout: Duration = .seconds(120)) async throws -> [Received] {
        try await Waits.until("\(count) webhook requests", timeout: timeout) { self.received.count >= count }
        return received
    }

    static func run<T: Sendable>(_ body: @Sendable (WebhookReceiver) async throws -> T) async throws -> T {
        let holder = Mutex<WebhookReceiver?>(nil)
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            guard let receiver = holder.withLock({ $0 }) else { return Response(status: .serviceUnavailable) }
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let (status, hold, size) = receiver.state.withLock { state in
                state.received.append(
                    Received(
                        delivery: request.headers[HTTPField.Name("Upshift-Delivery")!],
                        signature: request.headers[HTTPField.Name("Upshift-Signature")!],
                        contentType: request.headers[.contentType], body: Data(bytes.readableBytesView)))
                return (
                    state.script.isEmpty ? 200 : state.script.removeFirst(), state.holds.isEmpty ? nil : state.holds.removeFirst(),
                    state.answerBytes
                )
            }
            if let hold { try await Task.sleep(for: hold) }
            let body = size.map { ByteBuffer(repeating: UInt8(ascii: "x"), count: $0) } ?? ByteBuffer(string: "ok")
            var headers = HTTPFields()
            if (300..<400).contains(status) { headers[.location] = "/hook" }
            return Response(status: .init(code: status), headers: headers, body: .init(byteBuffer: body))
        }
        return try await LoopbackServer.run(router, name: "the webhook receiver") { port in
            let receiver = WebhookReceiver(port: port)
            holder.withLock { $0 = receiver }
            return try await body(receiver)
        }
    }
}
