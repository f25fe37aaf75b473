import Hummingbird
import NIOCore
import ServiceLifecycle
import UpshiftTestSupport

/// A stand-in for software Upshift talks to (the App Store's lookup, a team's webhook receiver), served by
/// Hummingbird on a free port of 127.0.0.1 for the duration of a test's `body`, which gets the port.
enum LoopbackServer {
    static func run<T: Sendable>(
        _ router: Router<BasicRequestContext>, name: String, _ body: @Sendable (Int) async throws -> T
    ) async throws -> T {
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let app = Application(
            router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
            onServerRunning: { channel in
                if let port = channel.localAddress?.port { listening.yield(port) }
                listening.finish()
            }, logger: TestEnvironment.logger)
        let services = ServiceGroup(
            configuration: .init(services: [app], gracefulShutdownSignals: [], logger: TestEnvironment.logger))
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { listening.finish() }
                try await services.run()
            }
            var iterator = ports.makeAsyncIterator()
            guard let port = await iterator.next() else {
                try await tasks.next()
                throw HarnessError("\(name) stopped before it listened")
            }
            defer { tasks.cancelAll() }
            let value = try await body(port)
            await services.triggerGracefulShutdown()
            return value
        }
    }
}
