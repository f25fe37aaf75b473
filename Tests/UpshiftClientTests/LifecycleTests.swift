import Foundation
import Testing
import UpshiftClient

/// The app's lifecycle as a stream the test drives.
@Suite struct LifecycleTests {
    @Test func foregroundChecksAndBackgroundFlushes() async throws {
        let server = FakeServer(decision: FakeServer.decision(.soft))
        let clock = TestClock()
        let sdk = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: server, clock: clock))
        let decisions = await sdk.decisions()
        let (events, lifecycle) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
        let wrapped = Lines()
        let following = Task {
            await sdk.follow(events) { work in
                wrapped.append("begin")
                await work()
                wrapped.append("end")
            }
        }
        var received = decisions.makeAsyncIterator()

        lifecycle.yield(.foreground)
        #expect(await received.next()?.action == .soft)
        #expect(server.checks.count == 1)
        lifecycle.yield(.foreground)  // the answer is fresh: no request
        #expect(await received.next()?.origin == .stored)
        #expect(server.checks.count == 1)

        await sdk.record(.launched)
        lifecycle.yield(.background)
        lifecycle.finish()
        await following.value
        #expect(server.types() == ["launched"])
        #expect(wrapped.lines == ["begin", "end"])
        await sdk.stop()
    }

    /// While the decision is a force, returning to the foreground asks the server even though the stored
    /// answer is fresh: a force lifted by mistake clears at once, not a day later.
    @Test func aLiftedForceClearsOnTheNextForeground() async throws {
        let server = FakeServer(decision: FakeServer.decision(.force))
        let sdk = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: server))
        #expect(await sdk.check().action == .force)
        server.decision = FakeServer.decision(.none)
        let decisions = await sdk.decisions()
        let (events, lifecycle) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
        let following = Task { await sdk.follow(events) }
        lifecycle.yield(.foreground)
        var received = decisions.makeAsyncIterator()
        let next = await received.next()
        #expect(next?.action == CheckAction.none)
        #expect(next?.origin == .server)
        #expect(server.checks.last?.value(forHTTPHeaderField: "Cache-Control") == "no-cache")
        lifecycle.finish()
        await following.value
        await sdk.stop()
    }
}
