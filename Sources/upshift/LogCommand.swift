import ArgumentParser
import Foundation
import NIOCore
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct LogCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log", abstract: "Export the event log.", subcommands: [Export.self])

    struct Export: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Write an app's events after a cursor for a warehouse, or a closed month's archive.",
            discussion: """
                Each row starts with its cursor; at the end the command prints the cursor to resume from on
                standard error ("resume with --since 1234:56"). Rows are those of transactions that have
                committed, in commit-safe order (docs/OPERATIONS.md, "Export for a warehouse").
                Example: upshift log export --app demo --since 0:0 --format csv --gzip --output demo.csv.gz
                With --month, every app's events of a month that can no longer receive any go to
                event_log_YYYY_MM.copy.gz (COPY text format), with .sha256 and .rows files beside it.
                Example: upshift log export --month 2026-09 --directory /srv/upshift/archive
                """)
        @Option(help: "The app id (an export for a warehouse).") var app: String?
        @Option(help: "A closed month, YYYY-MM: all apps' events of it as an archive (COPY text, gzipped).")
        var month: String?
        @Option(help: "With --month: the folder of the archive (default: UPSHIFT_EXPORT_DIR, else this folder).")
        var directory: String?
        @Option(help: "Export the events after this cursor (tx_id:position), as an earlier export gave it.")
        var since = "0:0"
        @Option(help: "At most this many events (default: every committed one).") var limit: Int?
        @Option(help: "ndjson or csv.") var format: EventExportFormat = .ndjson
        @Flag(help: "Compress the output with gzip.") var gzip = false
        @Option(help: "Write to this file (written whole or not at all) instead of standard output.") var output: String?

        func validate() throws {
            if let month {
                guard app == nil, limit == nil, output == nil, !gzip, since == "0:0" else {
                    throw ValidationError("--month takes only --directory (an archive holds every app's events of the month)")
                }
                guard LogMonth(month) != nil else { throw ValidationError("--month: '\(month)' is not a month YYYY-MM") }
                return
            }
            guard directory == nil else { throw ValidationError("--directory goes with --month") }
            guard let app else { throw ValidationError("give --app (an export for a warehouse) or --month (an archive)") }
            guard (try? AppID.named(app)) != nil else { throw ValidationError("--app: '\(app)' is not an app id") }
            guard FeedPosition(cursor: since) != nil else {
                throw ValidationError("--since: '\(since)' is not a cursor tx_id:position, such as 0:0")
            }
            if let limit, limit < 1 { throw ValidationError("--limit: at least 1") }
        }

        func run() async throws {
            if let month = month.flatMap(LogMonth.init) { return try await archive(month) }
            let exported: (events: Int, resume: String)
            if let output {
                do {
                    exported = try await WholeFile.write(URL(fileURLWithPath: output)) { file in try await export { try await file.write($0) } }
                } catch let error as CocoaError {
                    throw CommandFailure(description: "--output: cannot write \(output): \(error.localizedDescription)")
                } catch let error as POSIXError {
                    throw CommandFailure(description: "--output: cannot write \(output): \(error.localizedDescription)")
                }
            } else {
                exported = try await export { try FileHandle.standardOutput.write(contentsOf: $0) }
            }
            FileHandle.standardError.write(
                Data("exported \(exported.events) events of \(app ?? ""); resume with --since \(exported.resume)\n".utf8))
        }

        /// Writes the archive of `month`, then prints where, its rows and its SHA-256.
        private func archive(_ month: LogMonth) async throws {
            let folder = directory ?? ProcessInfo.processInfo.environment["UPSHIFT_EXPORT_DIR"] ?? "."
            let written = try await withDatabase { pool, logger in
                // Its archive was written when it was dropped; an empty one must not take its name.
                if let horizon = try await LogRetention(pool: pool, logger: logger).horizon(), month.end <= horizon.keptFrom {
                    throw CommandFailure(
                        description: """
                            --month: \(month) was dropped by retention (the log keeps events from \
                            \(Timestamp.format(horizon.keptFrom))): its archive is \(LogArchive.fileName(month)) in the folder \
                            retention writes to (UPSHIFT_EXPORT_DIR)
                            """)
                }
                do {
                    return try await LogArchive.write(
                        month, into: URL(fileURLWithPath: folder, isDirectory: true),
                        exporter: EventExporter(pool: pool, logger: logger, pageSize: 10_000), now: SystemClock().now(),
                        field: "--month")
                } catch let error as FieldError {
                    throw CommandFailure(description: error.description)
                } catch let error as CocoaError {
                    throw CommandFailure(description: "cannot write into \(folder): \(error.localizedDescription)")
                } catch let error as POSIXError {
                    throw CommandFailure(description: "cannot write into \(folder): \(error.localizedDescription)")
                }
            }
            print("\(written.file.path): \(written.rows) events of \(month), sha256 \(written.sha256)")
        }

        /// Writes the export through `output`; returns how many events it wrote and the cursor to resume from.
        private func export(_ output: @escaping @Sendable (Data) async throws -> Void) async throws -> (events: Int, resume: String) {
            let (app, since, limit, format, gzip) = (try AppID.named(app ?? ""), FeedPosition(cursor: since)!, limit, format, gzip)
            return try await withDatabase { pool, logger in
                let exporter = EventExporter(pool: pool, logger: logger)
                let range: EventExporter.Range
                do {
                    try await LogRetention(pool: pool, logger: logger).requireWhole(after: since, field: "--since")
                    range = try await exporter.range(app: app, after: since, limit: limit, field: "--since")
                } catch let error as FieldError {
                    throw CommandFailure(description: error.description)
                }
                let stream = gzip ? try GzipStream() : nil
                func write(_ bytes: ByteBuffer) async throws { try await output(Data(bytes.readableBytesView)) }
                let events = try await exporter.write(range, as: format) { page in
                    let bytes = ByteBuffer(string: page)
                    try await write(try stream?.compress(bytes) ?? bytes)
                }
                if let stream { try await write(try stream.finish()) }
                return (events, range.through.cursor)
            }
        }
    }
}

extension EventExportFormat: ExpressibleByArgument {}
