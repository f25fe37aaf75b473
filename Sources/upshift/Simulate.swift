import ArgumentParser
import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftSimulation
import UpshiftStore

struct Simulate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Drive a simulated fleet through the Swift SDK against Upshift started in-process, then compare every report with the fleet's own ground truth.",
        discussion: """
            Needs DATABASE_URL (or POSTGRES_*). Creates its own app, releases, policy and keys; the period ends now \
            (or at --end). \
            Exits non-zero, listing the differences, when a report differs from the ground truth.
            """)

    @Option(help: "Installs in the fleet (default: 2,000; 20,000 for the health scenario).") var installs: Int?
    @Option(help: "Simulated days, ending now (or at --end).") var days = 45
    @Option(help: "Seed of the random generator: the same seed drives the same fleet.") var seed: UInt64 = 1
    @Option(help: "The app to create (default: sim-<seed>-<random>).") var app: String?
    @Flag(help: "No progress line.") var quiet = false
    @Option(help: "End of the period, RFC 3339 (default: now): with the same seed, replays an earlier run's timeline.")
    var end: String?
    @Option(
        help: """
            standard; phased: release 1.2 rolls out on the App Store's schedule (1 % to 100 % over 6 days) while the \
            fleet runs, and every check it decides must offer it exactly when the step in force admits the install; or \
            health: live rules act on the fleet's abnormal exits and adoption (the guarded health halt, the advance \
            rule, a raise of the minimum), each action held against the rules' definitions computed from the fleet's \
            facts, then the guarded rule over 200 healthy and 20 bad releases of the fleet model, in process.
            """)
    var scenario: Scenario = .standard

    @Option(help: "health: how many times the healthy rate of abnormal exits the bad release has on one OS major (1–20).")
    var badFactor = 2.0

    enum Scenario: String, ExpressibleByArgument, CaseIterable {
        case standard, phased, health
    }

    func run() async throws {
        let installs = installs ?? (scenario == .health ? 20_000 : 2_000)
        guard installs > 0, installs <= 1_000_000 else { throw ValidationError("--installs must be 1…1,000,000") }
        guard days >= 3, days <= 365 else { throw ValidationError("--days must be 3…365") }
        let text = app ?? "sim-\(seed)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        guard let app = AppID(validating: text) else { throw ValidationError("--app \(AppID.rule)") }
        let end = try end.map { text in
            guard let date = Timestamp.parse(text) else { throw ValidationError("--end must be an RFC 3339 timestamp") }
            return date
        }
        if scenario == .health {
            var options = HealthScenario.Options(appId: app, end: end ?? Date(), progress: !quiet)
            options.installs = installs
            options.seed = seed
            guard badFactor >= 1, badFactor <= 20 else { throw ValidationError("--bad-factor must be 1…20") }
            options.badFactor = badFactor
            try await runHealthScenario(options)
            return
        }
        var options = FleetSimulation.Options(
            installs: installs, days: days, seed: seed, appId: app, end: end ?? Date(), progress: !quiet)
        options.phased = scenario == .phased
        try await runSimulation(options)
    }
}

/// Runs the health scenario, then the fleet model's trials; prints both; throws when the catalog differs
/// from what the rules' definitions say.
func runHealthScenario(_ options: HealthScenario.Options) async throws {
    let (result, elapsed) = try await simulating { configuration, logger in
        try await HealthScenario(options: options, configuration: configuration, logger: logger).run()
    }
    print(
        "simulate: health: app \(options.appId), \(options.installs) installs, \(result.days) days, seed \(options.seed): "
            + "\(result.stored.grouped) events stored (checks included) in \(elapsed)")
    for line in result.summary { print("simulate: \(line)") }
    let model = HealthFleetModel(installs: options.installs, seed: options.seed)
    let trials = await model.trials(healthy: 200, bad: 20, seed: options.seed)
    print("simulate: the guarded rule on the fleet model's counts (in process): \(trials.summary)")
    try failOn(result.differences, "differences between the catalog and the rules' definitions")
    print("simulate: every automatic action came at the evaluation the rules' definitions name, computed from the fleet's facts")
}

/// Runs a simulation and prints its verdict; throws when a report differs from the ground truth.
@discardableResult
func runSimulation(_ options: FleetSimulation.Options) async throws -> FleetSimulation.Result {
    let (result, elapsed) = try await simulating { configuration, logger in
        try await FleetSimulation(options: options, configuration: configuration, logger: logger).run()
    }
    print(
        "simulate: app \(options.appId), \(options.installs) installs, \(options.days) days, seed \(options.seed): "
            + "\(result.stored.grouped) events stored (checks included) in \(elapsed)")
    print("simulate: ground truth: \(result.summary)")
    try failOn(result.differences, "differences between the reports and the ground truth")
    print("simulate: every report equals the ground truth (adoption by day, time-to-update per release, prompt funnels)")
    return result
}

/// Runs `body` on the configuration of the environment, its database migrated (the simulation reads the
/// log before its server starts: a fresh database works too); returns what it returned and how long it took.
private func simulating<T>(_ body: (AppConfiguration, Logger) async throws -> T) async throws -> (T, String) {
    let configuration: AppConfiguration
    do {
        configuration = try AppConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
    } catch {
        throw ValidationError("\(error)")
    }
    try await migrateDatabase(loadMigrations())
    var logger = Logger(label: "upshift-simulate")
    logger.logLevel = .warning
    let started = ContinuousClock.now
    do {
        let result = try await body(configuration, logger)
        return (result, (ContinuousClock.now - started).formatted(.units(allowed: [.minutes, .seconds])))
    } catch {
        throw CommandFailure(database: error) ?? error
    }
}

/// Lists up to 50 `differences` on standard error and fails, naming how many and of what; nothing when none.
private func failOn(_ differences: [String], _ what: String) throws {
    guard !differences.isEmpty else { return }
    for line in differences.prefix(50) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
    throw CommandFailure(description: "\(differences.count) \(what)")
}
