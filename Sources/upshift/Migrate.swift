import ArgumentParser
import Foundation
import Logging
import UpshiftServer
import UpshiftStore

struct Migrate: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Apply pending SQL migrations (built into the binary from sql/) and exit.")

    @Option(help: "A folder of numbered migrations to apply instead of those built in (also UPSHIFT_MIGRATIONS_DIR).") var directory: String?

    func run() async throws {
        let migrations = try loadMigrations(from: directory)
        let applied = try await migrateDatabase(migrations)
        print(applied.isEmpty ? "up to date (\(migrations.count) migrations)" : "applied: \(applied.joined(separator: ", "))")
    }
}
