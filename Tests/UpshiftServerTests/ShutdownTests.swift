import Foundation
import Testing
import UpshiftCore
import UpshiftTestSupport

/// SIGTERM ends `upshift serve` within its bound and with status 0, whatever a client does, and
/// whether or not the database answers.
@Suite struct ShutdownTests {
    @Test func sigtermWithAClientStuckInItsBodyExitsZeroWithinTheBoundEveryAcknowledgedEventStored() async throws {
        let harness = try await Harness.make()
        let port = try await freePort()
        let server = try ServerProcess(
            database: harness.database, port: port,
            extraEnvironment: ["UPSHIFT_SHUTDOWN_TIMEOUT": "2", "UPSHIFT_BODY_TIMEOUT": "600"])
        try await server.start()
        let now = Date()
        var acknowledged: [String] = []
        for _ in 0..<20 {
            let batch = (0..<25).map { _ in clientEvent(occurredAt: now) }
            let reply = try await Server(port: port).postEvents(batch, key: harness.ingestKey)
            #expect(reply.status == 200)
            acknowledged += batch.compactMap { $0["id"] }
        }
        // A client that never finishes its body (its body deadline is far away).
        let stuck = try await RawConnection.open(port: port)
        await stuck.send(
            "POST /v1/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(harness.ingestKey)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 5000\r\n\r\n{\"events\": [")
        try await Task.sleep(for: .milliseconds(300))

        let started = ContinuousClock.now
        let status = await server.terminate()
        let took = ContinuousClock.now - started
        #expect(status == 0, "log: \(server.log().suffix(2_000))")
        // 2 s for requests, then the writer's flush: well under the 25 s a default would take.
        #expect(took < .seconds(8), "exit took \(took)")
        // The server is gone; the client's own event loop sees the close a moment later.
        try await ConnectionLimitsTests.waitUntil({ stuck.isClosed }, timeout: .seconds(2))
        let stored = try await harness.count(
            "SELECT count(*)::int FROM event_log WHERE event_id = ANY(\(acknowledged.compactMap(UUID.init(uuidString:))))")
        #expect(stored == acknowledged.count)
        await stuck.close()
    }

    @Test func sigtermWhileTheDatabaseIsDownExitsZeroAndCountsWhatItDropped() async throws {
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var database = harness.database
        database.port = proxy.port
        let port = try await freePort()
        let server = try ServerProcess(
            database: database, port: port, extraEnvironment: ["UPSHIFT_SHUTDOWN_TIMEOUT": "2", "UPSHIFT_BODY_TIMEOUT": "600"])
        try await server.start()
        await proxy.cut()
        // Checks keep answering from memory; their observations cannot be written.
        for index in 0..<5 {
            let install = "9f1c2d3e-4b5a-4c6d-8e7f-00000000000\(index)"
            let reply = try await Server(port: port).request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0&install=\(install)")
            #expect(reply.status == 200)
        }
        let stuck = try await RawConnection.open(port: port)
        await stuck.send("POST /v1/apps/expenses/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 900\r\n\r\n{")
        try await Task.sleep(for: .milliseconds(300))

        let started = ContinuousClock.now
        let status = await server.terminate()
        let took = ContinuousClock.now - started
        #expect(status == 0, "log: \(server.log().suffix(2_000))")
        #expect(took < .seconds(15), "exit took \(took)")
        await stuck.close()
        await proxy.stop()
    }
}
