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
        let trials = await model.trials(healthy: 200, bad: 20, seed: 4_242)
        print(
            "SimulationTests: health on the fleet model (20,000 installs): \(trials.summary); "
                + "the candidate's share by day: \(model.candidateShare.prefix(12).map { String(format: "%.1f", 100 * $0) }.joined(separator: ", ")) %; "
                + "\(ContinuousClock.now - started)")
        #expect(trials.falseHalts <= 6)
        #expect(trials.halts.count == 20)
        // How soon any rule could halt the bad candidate: docs/BENCHMARKS.md says that on this fleet none can
        // be counted on to do it before 5 % of the day's active installs run it, and this is the figure.
        let ceiling = model.ceiling(belowShare: 0.05, rate: 0.02, badFactor: 2, alpha: 0.01)
        print("SimulationTests: before 5 % of active installs run the candidate, \(ceiling.summary)")
        #expect(ceiling.power < 0.5, "\(ceiling.summary)")
    }

    /// The binomial tail the ceiling above is computed with, against values worked by hand.
    @Test func theBinomialTailMatchesWorkedValues() {
        #expect(HealthFleetModel.binomialTail(atLeast: 0, of: 10, chance: 0.5) == 1)
        #expect(HealthFleetModel.binomialTail(atLeast: 11, of: 10, chance: 0.5) == 0)
        #expect(abs(HealthFleetModel.binomialTail(atLeast: 2, of: 10, chance: 0.5) - (1 - 11.0 / 1024)) < 1e-12)
        #expect(abs(HealthFleetModel.binomialTail(atLeast: 1, of: 1, chance: 0.02) - 0.02) < 1e-12)
        #expect(abs(HealthFleetModel.binomialTail(atLeast: 3, of: 3, chance: 0.1) - 0.001) < 1e-12)
    }

    /// The health scenario (`upshift simulate --scenario health`) in this process, on a fleet a debug build
    /// runs in about a minute: 1,000 installs, the bad release eight times as prone to abnormal exits on one
    /// OS major, which so few installs need for it to be told apart within its 35 days (`upshift simulate`
    /// runs 20,000 installs and twice the rate: docs/BENCHMARKS.md). At every daily evaluation the catalog
    /// must hold what the rules' definitions, computed from the fleet's own facts, say by then; by the end the
    /// healthy release is out to everyone, the bad one halted and the minimum raised.
    @Test func theHealthScenarioActsAtTheEvaluationsTheRulesDefinitionsName() async throws {
        let started = ContinuousClock.now
        var configuration = AppConfiguration(database: try await TestDatabases.shared.fresh())
        configuration.migrationsDirectory = TestEnvironment.migrationsDirectory
        var options = HealthScenario.Options(appId: AppID(validating: "health-1")!, end: Date(), progress: false)
        options.installs = 1_000
        options.badFactor = 8
        var logger = TestEnvironment.logger
        logger.logLevel = .warning
        let result = try await HealthScenario(options: options, configuration: configuration, logger: logger).run()
        print(
            "SimulationTests: health scenario, 1,000 installs, \(result.days) days, \(result.stored) rows, "
                + "\(ContinuousClock.now - started):\n  " + result.summary.joined(separator: "\n  "))
        #expect(result.differences.isEmpty, "\(result.differences.prefix(20).joined(separator: "\n"))")
        #expect(result.healthy.percent == 100 && !result.healthy.halted)
        #expect(result.badHalt != nil, "the bad release was never halted")
        #expect(result.raisedAt != nil, "the minimum was never raised")
        // The actions the rules recorded name the figures they saw.
        #expect(result.summary.contains { $0.hasPrefix("rule health-guard acted at") && $0.contains("e-value") })
        #expect(result.summary.contains { $0.hasPrefix("rule raise-1-1 acted at") && $0.contains("active installs") })
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
