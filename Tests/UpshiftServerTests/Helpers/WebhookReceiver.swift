import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Synchronization
import UpshiftTestSupport

/// A team's webhook receiver that a test starts on loopback: it records every POST to `/hook` (headers
/// and body) and answers each with the next status of its script, `200` once the script is used up, after
/// the next delay of its holds, if any.
final class WebhookReceiver: Sendable {
    struct Received: Sendable {
        var delivery: String?
        var signature: String?
        var contentType: String?
        var body: Data
    }

    private let state = Mutex<(script: [Int], holds: [Duration], received: [Received])>(([], [], []))
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
            let (status, hold) = receiver.state.withLock { state in
                state.received.append(
                    Received(
                        delivery: request.headers[HTTPField.Name("Upshift-Delivery")!],
                        signature: request.headers[HTTPField.Name("Upshift-Signature")!],
                        contentType: request.headers[.contentType], body: Data(bytes.readableBytesView)))
                return (state.script.isEmpty ? 200 : state.script.removeFirst(), state.holds.isEmpty ? nil : state.holds.removeFirst())
            }
            if let hold { try await Task.sleep(for: hold) }
            return Response(status: .init(code: status), body: .init(byteBuffer: ByteBuffer(string: "ok")))
        }
        return try await LoopbackServer.run(router, name: "the webhook receiver") { port in
            let receiver = WebhookReceiver(port: port)
            holder.withLock { $0 = receiver }
            return try await body(receiver)
        }
    }
}
