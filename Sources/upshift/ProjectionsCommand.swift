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
            let lines = try await withDatabase { pool, logger in
                let store = ProjectionStore(pool: pool, logger: logger)
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
                applied set-based, in steps that commit one by one, which shows no progress until it ends.
                """)
        var inBatches = false
        @Option(
            help: """
                After each step of a set-based catch-up, pause this many times as long as the step took \
                (0: none, and parallel workers allowed), leaving the machine to the projections that serve.
                """)
        var rest: Double = ProjectionSettings().rebuildRest
        @Flag(
            help: """
                Switch the new generation in although retention dropped months of the log before it was \
                created, so that it counts fewer of them than the generation it replaces.
                """)
        var acceptShorterHistory = false

        func run() async throws {
            guard let definition = Projections.named(name) else {
                throw ValidationError("no projection \(name) (known: \(Projections.all.map(\.name).joined(separator: ", ")))")
            }
            let migrations = try loadMigrations()
            guard rest.isFinite, (0...100).contains(rest) else { throw ValidationError("--rest must be a number from 0 to 100") }
            let (batchSize, inBatches, rest, accept) = (batchSize, inBatches, rest, acceptShorterHistory)
            let result = try await withDatabase { pool, logger in
                try await Migrator(pool: pool, logger: logger).migrate(migrations)
                let store = ProjectionStore(pool: pool, logger: logger)
                let total = try await store.feedLength()
                var settings = ProjectionSettings()
                settings.batchSize = batchSize
                settings.rebuildRest = rest
                if inBatches { settings.backfillThreshold = nil }
                if let threshold = settings.backfillThreshold, total >= threshold {
                    FileHandle.standardError.write(Data("applying the log set-based, in steps that commit one by one (--in-batches to follow progress)\n".utf8))
                }
                let bar = ProgressBar(total: total)
                let generation = try await ProjectionRunner(store: store, settings: settings, logger: logger)
                    .rebuild(definition, acceptShorterHistory: accept) { bar.update($0) }
                bar.finish(generation)
                return generation
            }
            print("\(result.name): generation \(result.generation) (version \(result.version)) is \(result.state.rawValue), \(result.events) events")
        }
    }
}
