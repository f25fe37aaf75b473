import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// Clients resending a batch while its first attempt is still in flight (what an SDK does after a
/// timeout, and what anyone with an app's public ingest key can do on purpose).
@Suite(.serverTimeLimit) struct ConcurrentResendTests {
    @Test func overlappingBatchesNeverDeadlockAndEachIdIsAcceptedOnce() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        // Every flush carries one request, and eight run at once: the appends really overlap.
        configuration.ingestion.maximumBatchEvents = 500
        configuration.ingestion.concurrentFlushes = 8
        // Deadlocks are what is tested, not speed: a machine busy with other suites may take its time.
        configuration.ingestion.flushTimeout = .seconds(60)
        let now = harness.clock.now()
        let clients = 8
        let rounds = 50

        let (events, acceptedIn) = try await harness.run(configuration) { server in
            try await Self.resend(to: server, key: harness.ingestKey, now: now, clients: clients, rounds: rounds)
        }
        #expect(acceptedIn.count == events.count, "every id accepted in some answer")
        #expect(acceptedIn.values.allSatisfy { $0 == 1 }, "no id accepted in two answers")
        let stored = try await harness.count("SELECT count(*)::int FROM event_log WHERE install_id IS NOT NULL")
        let distinct = try await harness.count("SELECT count(DISTINCT event_id)::int FROM event_log WHERE install_id IS NOT NULL")
        #expect(stored == events.count)
        #expect(distinct == events.count)
        // PostgreSQL counts every deadlock it broke, per database.
        try await Task.sleep(for: .seconds(1))  // its statistics reach the view within a second
        #expect(try await harness.count("SELECT deadlocks::int FROM pg_stat_database WHERE datname = current_database()") == 0)
    }

    /// The rounds of the test: the events by id, and in how many answers each id was `accepted`.
    static func resend(to server: Server, key: String, now: Date, clients: Int, rounds: Int) async throws
        -> ([UUID: [String: String]], [UUID: Int])
    {
        // One event per id, the same fields in every copy: copies are resends, never conflicts.
        var events: [UUID: [String: String]] = [:]
        var acceptedIn: [UUID: Int] = [:]
        var round = (0..<500).map { _ in UUID() }
        for number in 0..<rounds {
            if number > 0 {
                // Half the ids of the round before, half new.
                round = Array(round.shuffled().prefix(250)) + (0..<250).map { _ in UUID() }
            }
            for id in round where events[id] == nil {
                let serial = events.count
                events[id] = clientEvent(
                    id: id, occurredAt: now.addingTimeInterval(-Double(serial % 3_600)),
                    install: UUID(uuidString: "9f1c2d3e-4b5a-4c6d-8e7f-\(String(format: "%012x", serial % 1_000))")!)
            }
            let replies = try await Self.post(round.map { events[$0]! }, clients: clients, to: server, key: key)
            for reply in replies {
                try #require(reply.status == 200, "round \(number): \(reply.text)")
                let results = try #require(try reply.json()["results"] as? [[String: Any]])
                for result in results {
                    let id = try #require((result["id"] as? String).flatMap(UUID.init(uuidString:)))
                    switch result["status"] as? String {
                    case "accepted": acceptedIn[id, default: 0] += 1
                    case "duplicate": break
                    default: Issue.record("round \(number): \(result)")
                    }
                }
            }
        }
        return (events, acceptedIn)
    }

    /// `clients` requests at once, each with its own shuffled order of `batch`.
    static func post(_ batch: [[String: String]], clients: Int, to server: Server, key: String) async throws -> [Server.Reply] {
        try await withThrowingTaskGroup(of: Server.Reply.self) { group in
            for _ in 0..<clients {
                group.addTask { try await server.postEvents(batch.shuffled(), key: key) }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
    }
}
