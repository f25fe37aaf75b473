import Foundation
import Logging
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftSimulation
import UpshiftStore
import UpshiftTestSupport

/// The fleet simulation (`upshift simulate`), run in this process: installs driven through the SDK against
/// the application started on loopback, whose own ground truth must equal every report (adoption by day,
/// time-to-update per release, prompt funnels). A few hundred installs exercise every rule the reports
/// have; `upshift simulate` runs thousands (docs/BENCHMARKS.md, "Fleet simulation").
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct SimulationTests {
    @Test func aFleetOverFortyDaysMatchesEveryReport() async throws {
        let result = try await Self.simulate(installs: 300, days: 40, seed: 7)
        #expect(result.differences.isEmpty, "\(result.differences.prefix(50).joined(separator: "\n"))")
        // The fleet behaves like one: each release of the period has a cohort, and part of it updates.
        let shares = result.summary.matches(of: #/(\d\.\d): cohort (\d+), updated by day 1 (\d+)%, day 7 (\d+)%, day 30 (\d+)%/#)
        #expect(shares.map { String($0.1) } == ["1.1", "1.2", "2.0"], "\(result.summary)")
        for share in shares {
            #expect(Int(share.2)! > 0 && Int(share.4)! > 0 && Int(share.3)! <= Int(share.5)!, "\(result.summary)")
        }
    }

    @Test func aPhasedRolloutOffersEachInstallTheReleaseExactlyWhenItsStepAdmitsIt() async throws {
        let result = try await Self.simulate(installs: 200, days: 30, seed: 11, phased: true)
        #expect(result.differences.isEmpty, "\(result.differences.prefix(50).joined(separator: "\n"))")
        // Checks on both sides of the buckets: some admitted, some not, every one answered as its step says.
        let match = try #require(
            result.summary.firstMatch(
                of: #/phased 1.2: (\d+) checks decided by its schedule \((\d+) admitted\), (\d+) offered it exactly/#),
            "\(result.summary)")
        let (checks, admitted, exact) = (Int(match.1)!, Int(match.2)!, Int(match.3)!)
        #expect(checks > 500 && admitted > 50 && admitted < checks, "\(result.summary)")
        #expect(exact == checks)
        // The backtest made before the minimum raise predicted the installs it forced.
        let predicted = try #require(
            result.summary.firstMatch(of: #/predicted (\d+) forced of (\d+) active installs \(facts: (\d+) of (\d+)\)/#),
            "\(result.summary)")
        #expect(predicted.1 == predicted.3 && predicted.2 == predicted.4 && Int(predicted.1)! > 0, "\(result.summary)")
    }

    /// The guarded health rule on the fleet model's own counts (``HealthFleetModel``, in process): 20,000
    /// installs over four OS majors, a previous release and a candidate each on the App Store's schedule,
    /// abnormal exits at 2 % of the days an install opens the app. Of 200 healthy candidates at most 6 are
    /// halted (the 99.5 % bound of 200 draws at the rule's 1 %); candidates twice as bad on one OS major are
    /// halted within their 35 days. Prints both, and the share of the day's active installs that ran the bad
    /// candidate on the day it was halted.
    @Test func theGuardedRuleOnTheFleetModelRarelyHaltsAHealthyReleaseAndHaltsABadOne() async {
        let started = ContinuousClock.now
        let model = HealthFleetModel(installs: 20_000, seed: 42)
        var random = SplitMix64(seed: 4_242)
        var falseHalts = 0
        for _ in 0..<200 {
            if model.firstHalt(rate: 0.02, badFactor: 1, random: &random) != nil { falseHalts += 1 }
            await Task.yield()
        }
        var halts: [(day: Int, share: Double)] = []
        for _ in 0..<20 {
            if let day = model.firstHalt(rate: 0.02, badFactor: 2, random: &random) {
                halts.append((day, model.candidateShare[day]))
            }
            await Task.yield()
        }
        halts.sort { $0.day < $1.day }
        let median = halts.isEmpty ? nil : halts[halts.count / 2]
        print(
            "SimulationTests: health on the fleet model (20,000 installs): \(falseHalts) of 200 healthy releases halted; "
                + "\(halts.count) of 20 twice as bad on iOS \(HealthFleetModel.badOSMajor) halted, median on day \(median?.day ?? -1) "
                + "with \(String(format: "%.1f", 100 * (median?.share ?? 0))) % of active installs on it "
                + "(first: day \(halts.first?.day ?? -1), \(String(format: "%.1f", 100 * (halts.first?.share ?? 0))) %); "
                + "the candidate's share by day: \(model.candidateShare.prefix(12).map { String(format: "%.1f", 100 * $0) }.joined(separator: ", ")) %; "
                + "\(ContinuousClock.now - started)")
        #expect(falseHalts <= 6)
        #expect(halts.count == 20)
    }

    /// Runs the simulation on a fresh database; prints its summary to the test log.
    static func simulate(installs: Int, days: Int, seed: UInt64, phased: Bool = false) async throws -> FleetSimulation.Result {
        var configuration = AppConfiguration(database: try await TestDatabases.shared.fresh())
        configuration.migrationsDirectory = TestEnvironment.migrationsDirectory
        var options = FleetSimulation.Options(
            installs: installs, days: days, seed: seed, appId: AppID(validating: "sim-\(seed)")!, end: Date(), progress: false)
        options.phased = phased
        var logger = TestEnvironment.logger
        logger.logLevel = .warning
        let result = try await FleetSimulation(options: options, configuration: configuration, logger: logger).run()
        print("SimulationTests: \(installs) installs, \(days) days, seed \(seed): \(result.stored) rows; \(result.summary)")
        return result
    }
}
