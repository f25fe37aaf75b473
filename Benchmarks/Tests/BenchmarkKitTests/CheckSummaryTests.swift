import Testing

@testable import BenchmarkKit

/// The check summary, from the raw outputs of a real run, against the summary that run printed.
@Suite struct CheckSummaryTests {
    static func measured(_ tag: String, cpu: String = "-", pace: String? = nil) throws -> CheckSummary.Measured {
        CheckSummary.Measured(run: try CheckRun(WrkSummary(parsing: Recorded.text("check/\(tag)-wrk.txt"))), cpu: cpu, pace: pace)
    }

    static func server(_ tag: String, cpuSeconds: Double, peak: Double) throws -> CheckSummary.Server {
        CheckSummary.Server(
            metrics: PrometheusText(try Recorded.text("check/\(tag)-metrics.txt")),
            usage: ServerUsage(cpuSeconds: cpuSeconds, peakRSSMiB: peak, exitStatus: 0), logLines: 0)
    }

    /// The run of 2026-11-24 16:44 (Recorded/check), with the head and CPU shares its summary printed.
    static func recorded() throws -> CheckSummary {
        let facts = RunFacts(
            started: "2026-11-24 16:44:42 UTC",
            machine: MachineDescription(cpus: 2, cpuModel: "AMD EPYC", memory: "23.5 GiB", load: "4.71 3.07 2.75"),
            finishedLoad: "4.91 3.89 3.10", revision: "9216595", postgresVersion: "15.18 (Debian 15.18-0+deb12u1)",
            durability: Durability(fsync: "on", synchronousCommit: "on"))
        let body = CheckSummary.Body(
            file: "check-body.json", bytes: try Recorded.text("check/check-body.json").utf8.count,
            decision: "soft, update_available", path: "/v1/apps/bench/check",
            query: "platform=ios&version=3.9.0&os=16.4&locale=de")
        return CheckSummary(
            facts: facts, nginxVersion: "nginx/1.22.1", durationSeconds: 15, connections: 64, cpus: 2,
            outputFolder: "/tmp/bench-before/.bench/check-20261124-164441", body: body,
            nginx: try measured("a", cpu: "100%"), trivialRoute: try measured("b", cpu: "99%"),
            trivialRoutePaced: try measured("b-paced", pace: "2.675"), check: try measured("c", cpu: "99%"),
            checkPaced: try measured("c-paced", pace: "3.055"), checkServer: try server("c", cpuSeconds: 35.8, peak: 61),
            checkWithInstall: try measured("d", cpu: "97%"),
            checkWithInstallServer: try server("d", cpuSeconds: 16.9, peak: 70), checkedRows: 164_952,
            checkedInstalls: 164_952, memory: try measured("e", cpu: "99%"),
            memoryServer: try server("e", cpuSeconds: 19.4, peak: 142), memoryPeakRSSMiB: 142)
    }

    @Test func reproducesTheRecordedSummary() throws {
        let summary = try Self.recorded().render()
        let expected = try Recorded.lines("check/summary.txt")
        #expect(summary.text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) == expected)
        #expect(summary.mustsHold)
    }

    /// Each paced run waits 64 connections / (half the max rate) between an answer and the next request.
    @Test func pacesAtHalfTheMaximumRate() throws {
        #expect(CheckSummary.pace(connections: 64, maxRequestsPerSecond: 47850.3) == "2.675")
        #expect(CheckSummary.pace(connections: 64, maxRequestsPerSecond: 41902.0) == "3.055")
    }

    @Test func aShortRunSaysItsFiguresDoNotCount() throws {
        var run = try Self.recorded()
        run.durationSeconds = 3
        let lines = run.render().text.split(separator: "\n").map(String.init)
        #expect(lines[1] == "SMOKE RUN: under 10 s per case, these figures do not count")
    }

    /// The roles the servers ran with follow the rate limiter's line; older runs print none.
    @Test func theRolesOfTheServersAreStated() throws {
        var run = try Self.recorded()
        #expect(!run.render().text.contains("roles of upshift serve"))
        run.roles = "http for (c), (d) and (e)"
        let lines = run.render().text.split(separator: "\n").map(String.init)
        let limiter = try #require(lines.firstIndex { $0.hasPrefix("rate limiter:") })
        #expect(lines[limiter + 1] == "roles of upshift serve: http for (c), (d) and (e)")
    }

    @Test func everyAnsweredCheckMustBeStoredOnce() throws {
        var run = try Self.recorded()
        run.checkedRows = 164_921
        #expect(run.render().text.contains("(d) checked rows stored 164921 = 2xx answers 164921  OK\n"))
        run.checkedRows = 164_900
        var summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("(d) MISMATCH: checked rows stored 164900, 2xx answers 164921"))
        run = try Self.recorded()
        run.checkedInstalls = 164_951
        summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("(d) ANOMALY: 164952 checked rows but 164951 distinct installs"))
    }

    @Test func aDroppedOrUncountedObservationFails() throws {
        var run = try Self.recorded()
        run.checkWithInstallServer.metrics = PrometheusText("upshift_check_observations_total 10\n")
        let summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("(d) observations dropped: missing"))
    }

    @Test func aNon2xxAnswerInAnyRunFails() throws {
        var run = try Self.recorded()
        run.checkPaced.run.non2xx = 2
        run.checkPaced.run.samples = ["status=429 body={}"]
        let summary = run.render()
        #expect(!summary.mustsHold)
        #expect(summary.text.contains("NON-2XX in (c-paced), first ones:\n      status=429 body={}\n"))
        // The table counts the max-rate and paced runs together.
        #expect(summary.text.contains("(c) upshift serve, check, no install           41902.0    1.37    4.07   17820.2    0.48    1.82        2"))
    }
}
