import Testing

@testable import BenchmarkKit

/// `scripts/bench catalog`'s verdicts: every write seen by the other instance within 1 s, and the other
/// apps' answers found in the cache at least 99 % of the time.
@Suite struct CatalogSummaryTests {
    static func passing() -> CatalogSummary {
        CatalogSummary(
            facts: RunFacts(
                started: "2026-11-29 05:00:00 UTC",
                machine: MachineDescription(cpus: 2, cpuModel: "AMD EPYC", memory: "23.5 GiB", load: "1.00 1.00 1.00"),
                finishedLoad: "2.00 2.00 2.00", revision: "abc1234", postgresVersion: "15.18",
                durability: Durability(fsync: "on", synchronousCommit: "on")),
            outputFolder: "/tmp/.bench/catalog-x", apps: 1_000, releasesPerApp: 50, seconds: 60, questions: 200,
            questionApps: 100, propagation: [0.012, 0.030, 0.250, 0.900], hits: 99_510, misses: 504, probes: 14,
            checksPerSecond: 4_000, checkStatuses: "200:240000,200:230000",
            servers: [ServerUsage(cpuSeconds: 60, peakRSSMiB: 120, exitStatus: 0), ServerUsage(cpuSeconds: 55, peakRSSMiB: 118, exitStatus: 0)])
    }

    @Test func aRunWhereEveryWriteIsSeenAndTheCacheHoldsPasses() {
        let summary = Self.passing().render()
        #expect(summary.mustsHold)
        let lines = summary.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("writes seen by B's check: 4 of 4; p50 30.0 ms, p99 900.0 ms, max 900.0 ms (bound 1 s)  PASS"))
        #expect(lines.contains("the other apps' checks in the answer cache: 99,500 hits, 500 misses (the written app's 14 probes left out), hit rate 99.50 % (target >= 99 %)  PASS"))
    }

    @Test func aWriteNotSeenWithinTheBoundOrAColdCacheFails() {
        var late = Self.passing()
        late.propagation.append(nil)
        late.misses += 1
        #expect(!late.render().mustsHold)
        #expect(late.render().text.contains("writes seen by B's check: 4 of 5"))
        var cold = Self.passing()
        cold.misses = 1_104
        #expect(!cold.render().mustsHold)
        var failing = Self.passing()
        failing.checkStatuses = "200:240000,503:3"
        #expect(!failing.render().mustsHold)
    }
}
