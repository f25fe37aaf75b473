import Foundation
import Testing
import UpshiftCore
import UpshiftTestSupport

/// SIGTERM ends `upshift serve` within its bound and with status 0, whatever a client does, and
/// whether or not the database answers.
@Suite(.tags(.timed), .serverTimeLimit) struct ShutdownTests {
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
        // The bound is 2 s for all of it (requests, then the writer's flush); a second more for the process
        // to start exiting and for the load of the machine.
        #expect(took < .seconds(3), "exit took \(took)")
        // The server is gone; the client's own event loop sees the close a moment later.
        try await Waits.until("the stuck connection closed", timeout: .seconds(2)) { stuck.isClosed }
        let stored = try await harness.count(
            "SELECT count(*)::int FROM event_log WHERE event_id = ANY(\(acknowledged.compactMap(UUID.init(uuidString:))))")
        #expect(stored == acknowledged.count)
        await stuck.close()
    }

    /// How the database is down: it refuses connections (closed at once), or it stops answering (a
    /// partition: every statement waits for its own timeout).
    enum Outage: String, Sendable, CaseIterable {
        case refused, unanswered
    }

    /// Thousands of check observations queued for a database that is down, and a client stuck in its
    /// body: SIGTERM still ends within the bound, status 0, and every observation that could not be
    /// written is counted as dropped (the writer gives up what is pending when the bound is spent).
    @Test(arguments: Outage.allCases)
    func sigtermWhileTheDatabaseIsDownExitsZeroWithinTheBoundAndCountsWhatItDropped(_ outage: Outage) async throws {
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var database = harness.database
        database.port = proxy.port
        let port = try await freePort()
        let server = try ServerProcess(
            database: database, port: port,
            extraEnvironment: ["UPSHIFT_SHUTDOWN_TIMEOUT": "2", "UPSHIFT_BODY_TIMEOUT": "600", "UPSHIFT_CHECK_RATE_LIMIT": "0"])
        try await server.start()
        switch outage {
        case .refused: await proxy.cut()
        case .unanswered: proxy.stall()
        }
        // Checks keep answering from memory; their observations cannot be written.
        let checks = 2_000
        let dropping = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for worker in 0..<8 {
                group.addTask {
                    for _ in stride(from: worker, to: checks, by: 8) {
                        let reply = try await Server(port: port).request(
                            .GET, "/v1/apps/expenses/check?platform=ios&version=1.0&install=\(UUID().uuidString.lowercased())")
                        #expect(reply.status == 200)
                    }
                }
            }
            try await group.waitForAll()
        }
        let droppedBefore = try await Server(port: port).metric("upshift_check_observations_dropped_total") ?? 0
        let stuck = try await RawConnection.open(port: port)
        await stuck.send("POST /v1/apps/expenses/check HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 900\r\n\r\n{")
        try await Task.sleep(for: .milliseconds(300))

        let started = ContinuousClock.now
        let status = await server.terminate()
        let took = ContinuousClock.now - started
        let log = server.log()
        #expect(status == 0, "log: \(log.suffix(2_000))")
        // The bound is 2 s for all of it; a second more for the process starting to exit and the load of the machine.
        #expect(took < .seconds(3), "exit took \(took)")
        // The writer's last word: how many observations were dropped since the start, as the metric counts.
        let line = try #require(log.split(separator: "\n").last { $0.contains("ingestion writer stopped") }, "\(log.suffix(2_000))")
        let dropped = line.split(separator: " ").first { $0.hasPrefix("check.observations.dropped=") }
            .flatMap { Int($0.dropFirst("check.observations.dropped=".count)) }
        #expect(dropped == checks, "\(line)")
        // Not a line per dropped observation: the first, then a count every 10 s (and the last word at exit).
        let warnings = log.split(separator: "\n").filter { $0.contains("check observations dropped") }
        let periods = Int((ContinuousClock.now - dropping) / .seconds(10))
        #expect((1...2 + periods).contains(warnings.count), "\(warnings.count) warnings in \(periods) periods of 10 s: \(warnings.prefix(5))")
        #expect(warnings.first?.contains("count=1 ") == true, "\(warnings.prefix(1))")
        #expect(droppedBefore <= Double(checks))
        #expect(try await harness.count("SELECT count(*)::int FROM event_log WHERE type = 'checked'") == 0)
        await stuck.close()
        await proxy.stop()
    }
}
