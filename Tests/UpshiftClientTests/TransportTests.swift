import Foundation
import Testing
import UpshiftClient

/// How batches and stored answers travel.
@Suite struct TransportTests {
    @Test func aBatchTooLargeIsSplitUntilItFits() async throws {
        let server = FakeServer()
        server.maximumBatch = 10
        var configuration = Fixture.configuration(directory: Fixture.directory(), server: server)
        configuration.batchSize = 100
        let sdk = Upshift(configuration: configuration)
        for _ in 0..<25 { await sdk.record(.launched) }
        await sdk.flush()
        #expect(server.events.count == 25)
        #expect(server.batches.allSatisfy { $0 <= 10 })
        #expect(await sdk.pendingEvents == 0)

        // One event the server will never take is dropped (and logged), not retried for ever.
        server.maximumBatch = 0
        await sdk.record(.launched)
        await sdk.flush()
        #expect(await sdk.pendingEvents == 0)
        #expect(server.events.count == 25)
        await sdk.stop()
    }

    @Test func aDecisionFromTheFutureIsStale() async throws {
        let server = FakeServer(decision: FakeServer.decision(.soft))
        let clock = TestClock()
        let sdk = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: server, clock: clock))
        #expect(await sdk.check().origin == .server)
        clock.advance(60)
        #expect(await sdk.check().origin == .stored)  // fresh (checkAfterSeconds is 3600)
        clock.advance(-7200)  // the clock was set back: the stored answer was received "later" than now
        #expect(await sdk.check().origin == .server)
        #expect(server.checks.count == 2)
        await sdk.stop()
    }
}
