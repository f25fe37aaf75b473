import Testing

@testable import BenchmarkKit

/// `scripts/bench memory`'s verdicts: RSS within 200 MB, every check 2xx within 1 s, every polite batch
/// stored once, refusals by the body budget and by no rate limiter, the limiters' tables filled.
@Suite struct MemorySummaryTests {
    static func checks(max: Double = 40, non2xx: Int = 0) throws -> ReportRun {
        try ReportRun(WrkSummary(parsing: """
            upshift-bench: duration_s=35.000
            upshift-bench: responses_2xx=6800
            upshift-bench: responses_non_2xx=\(non2xx)
            upshift-bench: socket_errors=connect:0,read:0,write:0,timeout:0
            upshift-bench: requests_per_s=194.3
            upshift-bench: bytes_per_response=420
            upshift-bench: latency_p50_ms=1.20
            upshift-bench: latency_p95_ms=4.00
            upshift-bench: latency_p99_ms=9.50
            upshift-bench: latency_max_ms=\(max)
            upshift-bench: statuses=200:6800\(non2xx > 0 ? ",503:\(non2xx)" : "")
            """))
    }

    static func passing() throws -> MemorySummary {
        MemorySummary(
            facts: RunFacts(
                started: "2026-12-01 14:00:00 UTC",
                machine: MachineDescription(cpus: 2, cpuModel: "AMD EPYC", memory: "23.5 GiB", load: "1.00 1.00 1.00"),
                finishedLoad: "2.00 2.00 2.00", revision: "abc1234", postgresVersion: "15.18",
                durability: Durability(fsync: "on", synchronousCommit: "on")),
            outputFolder: "/tmp/.bench/memory-x", seconds: 30, budgetBytes: 32 << 20,
            slow: .init(
                connections: 2_000, bodyBytes: 1_100, inflatedBytes: 1_047_552, spreadSeconds: 20, attempts: 40_000,
                bodiesSent: 90, answers: ["503": 39_900, "200": 90], mostHeld: 31),
            polite: .init(
                clients: 20, eventsPerBatch: 100, batchesStored: 600, batchesLost: 0, answers: [200: 600, 503: 40],
                failures: [:], eventsInLog: 60_000),
            checks: try checks(), budgetRefused: 39_940, rateLimited: 0, sampledPeakMiB: 96,
            server: ServerUsage(cpuSeconds: 30, peakRSSMiB: 98, exitStatus: 0),
            tables: [.init(name: "check (per address)", clients: 100_000, addressesNamed: 100_000, statuses: "200:180000", rssBeforeMiB: 40, rssAfterMiB: 60)],
            tablesServer: ServerUsage(cpuSeconds: 20, peakRSSMiB: 120, exitStatus: 0))
    }

    @Test func aRunWithinEveryBoundPasses() throws {
        let summary = try Self.passing().render()
        #expect(summary.mustsHold, "\(summary.text)")
        let lines = summary.text.split(separator: "\n").map(String.init)
        #expect(lines.contains("peak RSS of upshift serve: 98 MiB (VmHWM 98, sampled 96; target <= 200 MB)  PASS"))
        #expect(lines.contains("refusals: upshift_body_budget_refused_total 39940, upshift_rate_limited_total 0 (the budget's, not a limiter's)  PASS"))
        #expect(lines.contains("  check (per address): 100,000 of 100,000 client addresses named, RSS 40.0 -> 60.0 MiB (+20.0); statuses 200:180000"))
    }

    @Test func eachBrokenBoundFailsTheRun() throws {
        var fat = try Self.passing()
        fat.server.peakRSSMiB = 191  // 200.3 MB
        #expect(!fat.render().mustsHold)
        var slowCheck = try Self.passing()
        slowCheck.checks = try Self.checks(max: 1_000.5)
        #expect(!slowCheck.render().mustsHold)
        var refusedCheck = try Self.passing()
        refusedCheck.checks = try Self.checks(non2xx: 1)
        #expect(!refusedCheck.render().mustsHold)
        var lost = try Self.passing()
        lost.polite.eventsInLog -= 1
        #expect(!lost.render().mustsHold)
        var limited = try Self.passing()
        limited.rateLimited = 3
        #expect(!limited.render().mustsHold)
        var unfilled = try Self.passing()
        unfilled.tables[0].addressesNamed = 99_999
        #expect(!unfilled.render().mustsHold)
    }
}
