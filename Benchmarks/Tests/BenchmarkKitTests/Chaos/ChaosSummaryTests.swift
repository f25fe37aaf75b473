import Foundation
import Testing

@testable import BenchmarkKit

/// The summary of a chaos run: its figures, and a failure for every proof that does not hold.
@Suite struct ChaosSummaryTests {
    static let ids = (0..<4).map { _ in UUID() }

    static func passing() -> ChaosSummary {
        let facts = RunFacts(
            started: "2026-11-24 18:50:00 UTC",
            machine: MachineDescription(cpus: 2, cpuModel: "AMD EPYC", memory: "23.5 GiB", load: "1.00 1.00 1.00"),
            finishedLoad: "2.00 2.00 2.00", revision: "abc1234", postgresVersion: "15.18",
            durability: Durability(fsync: "on", synchronousCommit: "on"))
        var events = OutcomeCounts(), checks = OutcomeCounts()
        events.add("200", 1000)
        events.add(Exchange.unavailableWithRetryAfter, 20)
        events.add(Exchange.noAnswer, 30)
        checks.add("200", 800)
        checks.add(Exchange.noAnswer, 12)
        let exchanges = [
            Exchange(endpoint: .check, sentAt: 30.0, answeredAt: 30.1, status: 200),
            Exchange(endpoint: .events, sentAt: 30.0, answeredAt: 30.2, status: 503, retryAfter: true),
        ]
        return ChaosSummary(
            facts: facts, seed: 1, plannedSeconds: 60, recoveryBound: 30, outputFolder: "/tmp/.chaos/run-x",
            faults: [
                .init(fault: .killServer, planned: 8.1, done: 8.1, back: 9.9, detail: "pid 10"),
                .init(fault: .restartPostgres, planned: 20.0, done: 30.0, back: 31.5, detail: ""),
                .init(fault: .killServer, planned: 33.0, done: 35.0, back: 36.2, detail: "pid 11"),
                .init(fault: .killServer, planned: 44.0, done: 44.0, back: 45.0, detail: "pid 12"),
                .init(fault: .partitionServer, planned: 47.0, done: 47.0, back: 56.0, detail: ""),
            ],
            load: .init(
                eventsPerSecond: 500, checksPerSecond: 200, seconds: 60, singleBatches: 15_000, hundredBatches: 150,
                resentInFlight: 700, resentAfterAnswer: 760, retries: 90, skippedEvents: 0, skippedChecks: 0,
                eventsInFlightLimit: 1_024, checksInFlightLimit: 512, longestPause: 0.02, longestPauseEnded: 31.5, retriedDuplicates: 4, events: events,
                checks: checks),
            exactlyOnce: ExactlyOnce(
                sent: Set(ids), acknowledged: Set(ids[0..<3]), stored: [ids[0]: 1, ids[1]: 1, ids[2]: 1]),
            outage: OutageVerdict(exchanges, down: 30, up: 31.5), recovery: 1.25,
            projections: ProjectionComparison(incremental: ["install_state": ["{}"]], rebuilt: ["install_state": ["{}"]]),
            unexpectedExits: [], finalExitStatus: 0)
    }

    @Test func aRunWhereEveryProofHoldsPasses() {
        let summary = Self.passing().render()
        #expect(summary.mustsHold)
        let lines = summary.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("ingestion recovered 1.25 s after PostgreSQL accepted connections again, without a server restart (target 5 s, bound 30 s)  PASS"))
        #expect(lines.contains("achieved (2xx only): 0.1 events acknowledged/s, 16.7 event requests/s, 13.3 checks/s"))
        #expect(lines.contains("POST /v1/events answers: 200 1,000, 503 with Retry-After 20, no answer 30"))
        #expect(lines.contains("not sent, the in-flight limit reached: 0 event requests, 0 checks; the load's longest pause: 0.02 s (ending at 31.5 s)"))
        #expect(lines.contains { $0.hasPrefix("acknowledged with 200: 3; stored exactly once: 3; missing: 0;") && $0.hasSuffix("PASS") })
        #expect(lines.contains { $0.contains("pg_ctl restart -m immediate") && $0.contains("accepting connections again after 1.5 s") })
        #expect(lines.contains { $0.contains("black hole between server and PostgreSQL") && $0.contains("packets flowing again after 9.0 s") })
        #expect(lines.contains("sent: 4; never acknowledged: 1, of which stored once: 0; found stored by a retry (an answer lost after the COMMIT): 4"))
        #expect(!lines.contains { $0.hasSuffix("MISS") })
        #expect(lines.last == "musts: all hold (3 SIGKILLs, 1 PostgreSQL restart and 1 partition, exactly once, checks 200 and events 503 with Retry-After while PostgreSQL was down, recovery within 30 s, projections equal a rebuild, durability on)")
    }

    @Test func aSlowRecoveryFails() {
        var summary = Self.passing()
        summary.recovery = 30.01
        #expect(!summary.render().mustsHold)
        summary.recovery = nil
        #expect(!summary.render().mustsHold)
        #expect(summary.render().text.contains("ingestion did not recover"))
    }

    @Test(arguments: ["500", "502", "503 without Retry-After", "429 without Retry-After"])
    func aForbiddenAnswerAnywhereFails(outcome: String) {
        var summary = Self.passing()
        summary.load.events.add(outcome)
        #expect(!summary.render().mustsHold)
        var checks = Self.passing()
        checks.load.checks.add(outcome)
        #expect(!checks.render().mustsHold)
    }

    @Test func aFaultNotDoneFails() {
        var summary = Self.passing()
        summary.faults[3].done = nil
        #expect(!summary.render().mustsHold)
        summary = Self.passing()
        summary.faults[4].done = nil
        #expect(!summary.render().mustsHold)
        summary = Self.passing()
        summary.outage = nil
        #expect(!summary.render().mustsHold)
    }

    @Test func aServerThatExitsOnItsOwnFails() {
        var summary = Self.passing()
        summary.unexpectedExits = ["pid 13 exit 1 at 50.0 s"]
        #expect(!summary.render().mustsHold)
        summary = Self.passing()
        summary.finalExitStatus = 137
        #expect(!summary.render().mustsHold)
    }

    @Test func theOtherProofsFailTheRun() {
        var summary = Self.passing()
        summary.exactlyOnce = ExactlyOnce(sent: Set(Self.ids), acknowledged: [Self.ids[0]], stored: [:])
        #expect(!summary.render().mustsHold)
        summary = Self.passing()
        summary.projections = ProjectionComparison(incremental: ["a": ["1"]], rebuilt: ["a": ["2"]])
        #expect(!summary.render().mustsHold)
        summary = Self.passing()
        summary.facts.durability = Durability(fsync: "off", synchronousCommit: "on")
        #expect(!summary.render().mustsHold)
    }
}
