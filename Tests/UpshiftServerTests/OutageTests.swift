import Foundation
import Testing
import UpshiftStore
import UpshiftTestSupport

/// The database goes away behind a TCP proxy that this test cuts (never the shared cluster).
@Suite(.tags(.timed), .serverTimeLimit) struct OutageTests {
    @Test func eventsAnswer503WhileTheDatabaseIsUnreachableAndRecoverWithoutARestart() async throws {
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var configuration = harness.configuration()
        configuration.database.port = proxy.port
        configuration.ingestion.flushTimeout = .seconds(3)  // production's bound on a flush: the 503 comes within it
        let now = harness.clock.now()

        try await harness.run(configuration) { server in
            #expect(try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status == 200)

            await proxy.cut()
            let started = ContinuousClock.now
            let reply = try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey)
            let waited = ContinuousClock.now - started
            #expect(reply.status == 503)
            #expect(reply.headers["Retry-After"].first.flatMap(Int.init) != nil)
            #expect(waited < .seconds(10), "503 took \(waited)")
            // The process is up and says so; only the database probe fails.
            #expect(try await server.request(.GET, "/health/live").status == 200)
            #expect(try await server.request(.GET, "/health/ready").status == 200)
            #expect(try await server.request(.GET, "/health/db").status == 503)

            proxy.restore()
            try await Waits.until("posts succeeding again after the database came back", timeout: .seconds(60), every: .milliseconds(200)) {
                try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status == 200
            }
            // The projection runners, whose sessions the cut ended, reconnect and apply every stored event.
            try await harness.waitForProjections(timeout: .seconds(30))
        }
        await proxy.stop()
        // The first and the recovering post are stored; the 503'd ones were not acknowledged.
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL") >= 2)
    }
}
