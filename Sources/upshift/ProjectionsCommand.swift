import ArgumentParser
import Foundation
import Synchronization
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct ProjectionsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "projections", abstract: "Inspect and rebuild the projections behind the reports.",
        subcommands: [Status.self, Rebuild.self])

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Per projection generation: version, state, checkpoint, lag (events and seconds), dead letters.")

        func run() async throws {
            let lines = try await withDatabase { client, logger in
                let store = ProjectionStore(client: client, logger: logger)
                let generations = try await store.generations()
                let dead = try await store.deadLetterCounts()
                let now = SystemClock().now()
                var lines = [["PROJECTION", "GEN", "VERSION", "STATE", "CHECKPOINT", "EVENTS", "LAG_EVENTS", "LAG_SECONDS", "DEAD_LETTERS"]]
                for generation in generations {
                    let lag = try await store.lag(after: generation.checkpoint, now: now)
                    lines.append([
                        generation.name, String(generation.generation), String(generation.version), generation.state.rawValue,
                        generation.checkpoint.description, String(generation.events), String(lag.events),
                        String(format: "%.1f", lag.seconds), String(dead["\(generation.name):\(generation.generation)"] ?? 0),
                    ])
                }
                return lines
            }
            if lines.count == 1 { print("no projections yet: `upshift serve` creates them when it starts") }
            let widths = (0..<lines[0].count).map { column in lines.map { $0[column].count }.max() ?? 0 }
            for line in lines {
                print(zip(line, widths).map { $0.padding(toLength: $1, withPad: " ", startingAt: 0) }.joined(separator: "  "))
            }
        }
    }

    struct Rebuild: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Rebuild a projection into new tables from the start of the log while the current ones keep serving, then switch.")

        @Argument(help: "The projection: \(Projections.all.map(\.name).joined(separator: ", ")).") var name: String
        @Option(help: "Events per batch.") var batchSize = 10_000
        @Flag(
            help: """
                Apply the log in batches from the start. By default a log of 50,000 events or more is first \
                applied set-based, in one transaction, which shows no progress until it ends.
                """)
        var inBatches = false

        func run() async throws {
            guard let definition = Projections.named(name) else {
                throw ValidationError("no projection \(name) (known: \(Projections.all.map(\.name).joined(separator: ", ")))")
            }
            guard let folder = Migration.locateDirectory() else { throw ValidationError(MigrationError.directoryNotFound.description) }
            let migrations = try Migration.load(from: folder)
            let (batchSize, inBatches) = (batchSize, inBatches)
            let result = try await withDatabase { client, logger in
                try await Migrator(client: client, logger: logger).migrate(migrations)
                let store = ProjectionStore(client: client, logger: logger)
                let total = try await store.feedLength()
                var settings = ProjectionSettings()
                settings.batchSize = batchSize
                if inBatches { settings.backfillThreshold = nil }
                if let threshold = settings.backfillThreshold, total >= threshold {
                    FileHandle.standardError.write(Data("applying the log set-based in one transaction (--in-batches to follow progress)\n".utf8))
                }
                let bar = ProgressBar(total: total)
                let generation = try await ProjectionRunner(store: store, settings: settings, logger: logger)
                    .rebuild(definition) { bar.update($0) }
                bar.finish(generation)
                return generation
            }
            print("\(result.name): generation \(result.generation) (version \(result.version)) is \(result.state.rawValue), \(result.events) events")
        }
    }
}

/// `[#######.....]  61%  6,100,000 events  52,310 events/s  ETA 1m 14s` on standard error: redrawn in
/// place on a terminal, a line every few seconds otherwise.
final class ProgressBar: Sendable {
    private struct State {
        var lastDraw = ContinuousClock.now - .seconds(10)
        var started = ContinuousClock.now
    }

    private let total: Int64
    private let state = Mutex(State())
    private let isTerminal = isatty(STDERR_FILENO) != 0

    init(total: Int64) { self.total = total }

    func update(_ generation: ProjectionGeneration) {
        let now = ContinuousClock.now
        let line: String? = state.withLock { state in
            guard now - state.lastDraw >= (isTerminal ? .milliseconds(200) : .seconds(5)) else { return nil }
            state.lastDraw = now
            return Self.line(generation, total: total, elapsed: now - state.started)
        }
        if let line { draw(line) }
    }

    func finish(_ generation: ProjectionGeneration) {
        let elapsed = state.withLock { ContinuousClock.now - $0.started }
        draw(Self.line(generation, total: max(total, generation.checkpoint.position), elapsed: elapsed))
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private func draw(_ line: String) {
        FileHandle.standardError.write(Data((isTerminal ? "\r" + line : line + "\n").utf8))
    }

    static func line(_ generation: ProjectionGeneration, total: Int64, elapsed: Duration) -> String {
        let done = generation.checkpoint.position
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let width = 30
        let filled = Int(fraction * Double(width))
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(generation.events) / seconds : 0
        let remaining = rate > 0 ? Double(max(0, total - done)) * (Double(generation.events) / Double(max(done, 1))) / rate : 0
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            + String(format: "%3.0f%%", fraction * 100)
            + "  \(grouped(Int(generation.events))) events  \(grouped(Int(rate))) events/s  ETA \(duration(remaining))"
    }

    static func grouped(_ value: Int) -> String {
        let digits = Array(String(value))
        var out = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return out
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 60 ? "\(total / 60)m \(total % 60)s" : "\(total)s"
    }
}
