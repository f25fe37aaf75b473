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

    @Option(help: "Installs in the fleet.") var installs = 2_000
    @Option(help: "Simulated days, ending now (or at --end).") var days = 45
    @Option(help: "Seed of the random generator: the same seed drives the same fleet.") var seed: UInt64 = 1
    @Option(help: "The app to create (default: sim-<seed>-<random>).") var app: String?
    @Flag(help: "No progress line.") var quiet = false
    @Option(help: "End of the period, RFC 3339 (default: now): with the same seed, replays an earlier run's timeline.")
    var end: String?
    @Option(
        help: """
            standard, or phased: release 1.2 rolls out on the App Store's schedule (1 % to 100 % over 6 days) while the \
            fleet runs, and every check it decides must offer it exactly when the step in force admits the install.
            """)
    var scenario: Scenario = .standard

    enum Scenario: String, ExpressibleByArgument, CaseIterable {
        case standard, phased
    }

    func run() async throws {
        guard installs > 0, installs <= 1_000_000 else { throw ValidationError("--installs must be 1…1,000,000") }
        guard days >= 3, days <= 365 else { throw ValidationError("--days must be 3…365") }
        let text = app ?? "sim-\(seed)-\(String(UInt32.random(in: 0...UInt32.max), radix: 16))"
        guard let app = AppID(validating: text) else { throw ValidationError("--app \(AppID.rule)") }
        let end = try end.map { text in
            guard let date = Timestamp.parse(text) else { throw ValidationError("--end must be an RFC 3339 timestamp") }
            return date
        }
        var options = FleetSimulation.Options(
            installs: installs, days: days, seed: seed, appId: app, end: end ?? Date(), progress: !quiet)
        options.phased = scenario == .phased
        try await runSimulation(options)
    }
}

/// Runs a simulation and prints its verdict; throws when a report differs from the ground truth.
@discardableResult
func runSimulation(_ options: FleetSimulation.Options) async throws -> FleetSimulation.Result {
    var base: AppConfiguration
    do {
        base = try AppConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
    } catch {
        throw ValidationError("\(error)")
    }
    // The simulation reads the log before its server starts (and migrates): a fresh database works too.
    try await migrateDatabase(loadMigrations())
    var logger = Logger(label: "upshift-simulate")
    logger.logLevel = .warning
    let started = ContinuousClock.now
    let simulation = FleetSimulation(options: options, configuration: base, logger: logger)
    let result: FleetSimulation.Result
    do {
        result = try await simulation.run()
    } catch {
        throw CommandFailure(database: error) ?? error
    }
    let elapsed = ContinuousClock.now - started
    print(
        "simulate: app \(options.appId), \(options.installs) installs, \(options.days) days, seed \(options.seed): "
            + "\(result.stored.grouped) events stored (checks included) in \(elapsed.formatted(.units(allowed: [.minutes, .seconds])))")
    print("simulate: ground truth: \(result.summary)")
    guard result.differences.isEmpty else {
        for line in result.differences.prefix(50) { FileHandle.standardError.write(Data((line + "\n").utf8)) }
        throw CommandFailure(description: "\(result.differences.count) differences between the reports and the ground truth")
    }
    print("simulate: every report equals the ground truth (adoption by day, time-to-update per release, prompt funnels)")
    return result
}
