import Foundation
import Testing
import UpshiftStore
import UpshiftTestSupport

/// `upshift simulate`: a fleet driven through the SDK against the application started in-process, whose
/// own ground truth must equal every report (adoption by day, time-to-update per release, prompt funnels).
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct SimulationTests {
    @Test func twoThousandInstallsOverFortyFiveDaysMatchEveryReport() async throws {
        let database = try await TestDatabases.shared.fresh()
        let (status, output) = try await Self.simulate(["--installs", "2000", "--days", "45", "--seed", "7"], database: database)
        print(output)  // the verdict and the shares updated by day 1, 7 and 30, in the test log
        #expect(status == 0, "\(output)")
        #expect(output.contains("every report equals the ground truth"), "\(output)")
        // The fleet behaves like one: the releases of the period reach plausible shares (the bands).
        #expect(output.contains("1.1: cohort"), "\(output)")
    }

    @Test func aPhasedRolloutOffersEachInstallTheReleaseExactlyWhenItsStepAdmitsIt() async throws {
        let database = try await TestDatabases.shared.fresh()
        let (status, output) = try await Self.simulate(
            ["--installs", "600", "--days", "30", "--seed", "11", "--scenario", "phased"], database: database)
        print(output)
        #expect(status == 0, "\(output)")
        #expect(output.contains("every report equals the ground truth"), "\(output)")
        // Checks on both sides of the buckets: some admitted, some not, every one answered as its step says.
        let match = try #require(
            output.firstMatch(of: #/phased 1.2: (\d+) checks decided by its schedule \((\d+) admitted\), (\d+) offered it exactly/#),
            "\(output)")
        let (checks, admitted, exact) = (Int(match.1)!, Int(match.2)!, Int(match.3)!)
        #expect(checks > 500 && admitted > 50 && admitted < checks, "\(output)")
        #expect(exact == checks)
        // The backtest made before the minimum raise predicted the installs it forced.
        let predicted = try #require(
            output.firstMatch(of: #/predicted (\d+) forced of (\d+) active installs \(facts: (\d+) of (\d+)\)/#), "\(output)")
        #expect(predicted.1 == predicted.3 && predicted.2 == predicted.4 && Int(predicted.1)! > 0, "\(output)")
    }

    /// Runs the `upshift` binary (`UPSHIFT_SIMULATE_BIN` when set: scripts/test builds a release one, the
    /// debug build is several times slower here).
    static func simulate(_ arguments: [String], database: DatabaseSettings, environment extra: [String: String] = [:])
        async throws -> (Int32, String)
    {
        let process = Process()
        if let path = ProcessInfo.processInfo.environment["UPSHIFT_SIMULATE_BIN"], !path.isEmpty {
            process.executableURL = URL(fileURLWithPath: path)
        } else {
            process.executableURL = try TestEnvironment.binary()
        }
        process.arguments = ["simulate", "--quiet"] + arguments
        var environment = ProcessInfo.processInfo.environment
        var url = "postgres://\(database.username)"
        if let password = database.password { url += ":\(password)" }
        environment["DATABASE_URL"] = url + "@\(database.host):\(database.port)/\(database.database)"
        environment["UPSHIFT_MIGRATIONS_DIR"] = TestEnvironment.migrationsDirectory.path
        for (key, value) in extra { environment[key] = value }
        process.environment = environment
        let output = TestEnvironment.scratch("simulate").appendingPathExtension("log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
        while process.isRunning { try await Task.sleep(for: .milliseconds(200)) }
        try handle.close()
        return (process.terminationStatus, (try? String(contentsOf: output, encoding: .utf8)) ?? "")
    }
}
