import Foundation
import Testing

@testable import UpshiftClient

/// The app's lifecycle as a stream the test drives, and the background time a flush runs in (what the
/// UIKit adapter passes `beginBackgroundTask` and `endBackgroundTask` to).
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

    /// A process that ends in the foreground (a crash, a kill) leaves its session open: the next process
    /// reports it once, as `abnormal_exit` with the version, build and start of that session, even when
    /// the app was updated in between; the one after it reports nothing more.
    @Test func aSessionLeftOpenIsReportedOnceByTheNextProcess() async throws {
        let server = FakeServer()
        let clock = TestClock()
        let directory = Fixture.directory()
        let began = clock.now()
        let crashed = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server, clock: clock))
        await crashed.launch()
        await crashed.enteredForeground()
        await crashed.stop()  // and the process dies: no background

        clock.advance(3_600)
        let next = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, clock: clock))
        await next.launch()
        await next.flush()
        let exits = server.events.filter { $0["type"] == .string("abnormal_exit") }
        #expect(exits.count == 1)
        let exit = try #require(exits.first)
        #expect(exit["appVersion"] == .string("1.0"))
        #expect(exit["build"] == .number(JSONNumber(7)))
        #expect(exit["occurredAt"] == .string(Timestamp.format(began)))
        #expect(server.types().sorted() == ["abnormal_exit", "updated"])
        await next.stop()

        let third = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, clock: clock))
        await third.launch()
        await third.flush()
        #expect(server.types().sorted() == ["abnormal_exit", "updated"])
        await third.stop()
    }

    /// A session that ends in the background is no abnormal exit, and an app that does not follow its
    /// lifecycle opens no session: nothing is reported for either.
    @Test func sessionsEndedInTheBackgroundOrNeverOpenedAreNotReported() async throws {
        for followsLifecycle in [true, false] {
            let server = FakeServer()
            let directory = Fixture.directory()
            let first = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
            await first.launch()
            if followsLifecycle {
                let (events, lifecycle) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
                let following = Task { await first.follow(events) }
                lifecycle.yield(.foreground)
                lifecycle.yield(.background)
                lifecycle.finish()
                await following.value
            }
            await first.record(.launched)
            await first.stop()

            let next = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
            await next.launch()
            await next.flush()
            #expect(server.types() == ["launched"], "follows its lifecycle: \(followsLifecycle)")
            await next.stop()
        }
    }

    /// Background time granted and given back by the test, as UIKit does: the grants begun and ended,
    /// and the handler for when time is up.
    @MainActor final class System {
        var calls: [String] = []
        var expire: (@MainActor @Sendable () -> Void)?
        private var next = 0

        nonisolated init() {}

        func begin(_ expired: @escaping @MainActor @Sendable () -> Void) -> Int {
            next += 1
            calls.append("begin \(next)")
            expire = expired
            return next
        }

        func end(_ grant: Int) {
            calls.append("end \(grant)")
        }
    }

    @Test func theBackgroundTimeEndsWhenTheFlushIsDone() async throws {
        let server = FakeServer()
        let sdk = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: server))
        let system = System()
        let (events, lifecycle) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
        await sdk.record(.launched)
        lifecycle.yield(.background)
        lifecycle.finish()
        await sdk.follow(events) { work in
            await BackgroundTime.run(begin: { system.begin($0) }, end: { system.end($0) }, work)
        }
        #expect(server.types() == ["launched"])
        #expect(await system.calls == ["begin 1", "end 1"])
        await sdk.stop()
    }

    /// When the system ends the background time, the flush is cancelled (its events stay queued) and the
    /// grant is ended from the expiration handler itself, before the flush has wound down: a task left
    /// running past its time gets the app killed.
    @Test func backgroundTimeThatRunsOutCancelsTheFlushAndEndsAtOnce() async throws {
        let server = FakeServer()
        server.stallsPosts = true
        let sdk = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: server))
        let system = System()
        let (events, lifecycle) = AsyncStream.makeStream(of: AppLifecycleEvent.self)
        await sdk.record(.launched)
        let following = Task {
            await sdk.follow(events) { work in
                await BackgroundTime.run(begin: { system.begin($0) }, end: { system.end($0) }, work)
            }
        }
        lifecycle.yield(.background)
        for _ in 0..<500 where server.posts == 0 { try await Task.sleep(for: .milliseconds(10)) }
        #expect(server.posts == 1, "the flush is sending")
        await MainActor.run {
            system.expire?()
            #expect(system.calls == ["begin 1", "end 1"])
        }
        lifecycle.finish()
        await following.value
        #expect(await system.calls == ["begin 1", "end 1"], "ended once")
        #expect(await sdk.pendingEvents == 1)
        #expect(server.events.isEmpty)
        await sdk.stop()
    }
}
