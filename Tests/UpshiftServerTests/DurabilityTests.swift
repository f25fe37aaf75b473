import Foundation
import PostgresNIO
import Synchronization
import Testing
import UpshiftCore
import UpshiftTestSupport

/// What a fleet of clients saw: events acknowledged with 200, and when.
final class Acknowledgements: Sendable {
    private let state = Mutex<(acked: Set<String>, ackedBeforeKill: Set<String>, killed: Bool)>(([], [], false))

    func record(_ ids: [String]) {
        state.withLock { state in
            state.acked.formUnion(ids)
            if !state.killed { state.ackedBeforeKill.formUnion(ids) }
        }
    }

    func markKilled() { state.withLock { $0.killed = true } }
    var acked: Set<String> { state.withLock { $0.acked } }
    var ackedBeforeKill: Set<String> { state.withLock { $0.ackedBeforeKill } }
}

/// Runs the real `upshift serve` binary (scripts/test builds it) and kills it.
@Suite(.serverTimeLimit) struct DurabilityTests {
    /// Each client posts its batches in order and retries a batch until it gets a 200, as the SDK does.
    func postFleet(port: Int, key: String, clients: Int, batches: Int, size: Int, acks: Acknowledgements) async throws -> Set<String> {
        let now = Date()
        let allBatches = (0..<clients).map { _ in
            (0..<batches).map { _ in (0..<size).map { _ in clientEvent(occurredAt: now) } }
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            for batchesOfClient in allBatches {
                group.addTask {
                    for batch in batchesOfClient {
                        try await Waits.until("a batch stored", timeout: .seconds(120)) {
                            guard let reply = try? await Server(port: port).postEvents(batch, key: key), reply.status == 200 else {
                                return false
                            }
                            acks.record(batch.compactMap { $0["id"] })
                            return true
                        }
                    }
                }
            }
            try await group.waitForAll()
        }
        return Set(allBatches.joined().joined().compactMap { $0["id"] })
    }

    @Test func everyAcknowledgedEventSurvivesKill9ExactlyOnce() async throws {
        let harness = try await Harness.make()
        let port = try await freePort()
        let acks = Acknowledgements()
        var server = try ServerProcess(database: harness.database, port: port)
        try await server.start()

        async let fleet = postFleet(port: port, key: harness.ingestKey, clients: 8, batches: 60, size: 10, acks: acks)
        // Kill the server mid-stream, once some events are in.
        while acks.acked.count < 1_000 { try await Task.sleep(for: .milliseconds(5)) }
        acks.markKilled()
        server.kill9()
        let ackedBeforeKill = acks.ackedBeforeKill
        #expect(ackedBeforeKill.count >= 1_000)
        try await Task.sleep(for: .milliseconds(300))  // clients fail and keep retrying meanwhile

        server = try ServerProcess(database: harness.database, port: port)
        try await server.start()
        let sent = try await fleet
        #expect(sent.count == 4_800)

        let stored = try await harness.sql { client in
            var counts: [String: Int] = [:]
            let rows = try await client.query("SELECT event_id::text, count(*)::int FROM event_log WHERE install_id IS NOT NULL GROUP BY 1")
            for try await (id, count) in rows.decode((String, Int).self) { counts[id] = count }
            return counts
        }
        #expect(ackedBeforeKill.isSubset(of: Set(stored.keys)), "an event acknowledged before kill -9 is missing")
        #expect(Set(stored.keys) == sent)
        #expect(stored.values.allSatisfy { $0 == 1 })
        #expect(await server.terminate() == 0)
    }

    @Test func sigtermFlushesWhatIsPendingAndExitsZero() async throws {
        let harness = try await Harness.make()
        let port = try await freePort()
        let server = try ServerProcess(database: harness.database, port: port)
        try await server.start()
        let acks = Acknowledgements()
        let now = Date()
        // Requests in flight while SIGTERM arrives: each either gets its 200 (and is stored) or fails.
        async let posting: Void = withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<16 {
                group.addTask {
                    for _ in 0..<200 {
                        let batch = (0..<20).map { _ in clientEvent(occurredAt: now) }
                        guard let reply = try? await Server(port: port).postEvents(batch, key: harness.ingestKey, timeout: .seconds(5))
                        else { return }
                        if reply.status == 200 { acks.record(batch.compactMap { $0["id"] }) }
                    }
                }
            }
            try await group.waitForAll()
        }
        while acks.acked.count < 500 { try await Task.sleep(for: .milliseconds(5)) }
        let status = await server.terminate()
        try await posting
        #expect(status == 0, "log: \(server.log().suffix(2000))")
        #expect(server.log().contains("ingestion writer stopped"))
        let acked = acks.acked
        let stored = try await harness.count(
            "SELECT count(*)::int FROM event_log WHERE event_id = ANY(\(acked.compactMap(UUID.init(uuidString:))))")
        #expect(stored == acked.count)
    }
}
