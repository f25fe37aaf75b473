import ArgumentParser
import Foundation
import Logging
import PostgresNIO
import UpshiftCore
import UpshiftServer
import UpshiftStore

/// Runs `body` with a PostgreSQL client for the database of `DATABASE_URL` (or `POSTGRES_*`).
func withDatabase<T: Sendable>(_ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T) async throws -> T {
    let settings: DatabaseSettings
    do {
        settings = try DatabaseSettings.fromEnvironment(ProcessInfo.processInfo.environment)
    } catch {
        throw ValidationError("\(error)")
    }
    return try await withDatabase(settings, body)
}

/// Runs `body` with a PostgreSQL client (two connections) for `settings`.
func withDatabase<T: Sendable>(
    _ settings: DatabaseSettings, _ body: @escaping @Sendable (PostgresClient, Logger) async throws -> T
) async throws -> T {
    var logger = Logger(label: "upshift")
    logger.logLevel = .error
    let client = PostgresClient(configuration: settings.clientConfiguration(maximumConnections: 2), backgroundLogger: logger)
    return try await withThrowingTaskGroup(of: T?.self) { group in
        group.addTask {
            await client.run()
            return nil
        }
        defer { group.cancelAll() }
        do {
            return try await body(client, logger)
        } catch let error as PSQLError {
            throw CommandFailure(description: "database error: \(error.serverInfo?[.message] ?? String(describing: error.code))")
        }
    }
}

/// The numbered migrations of `directory`, else of UPSHIFT_MIGRATIONS_DIR or ./sql.
func loadMigrations(from directory: String? = nil) throws -> [Migration] {
    let folder = directory.map { URL(fileURLWithPath: $0, isDirectory: true) } ?? Migration.locateDirectory()
    guard let folder else { throw ValidationError(MigrationError.directoryNotFound.description) }
    return try Migration.load(from: folder)
}

/// Applies pending migrations; returns the names applied.
@discardableResult
func migrateDatabase(_ migrations: [Migration]) async throws -> [String] {
    try await withDatabase { client, logger in try await Migrator(client: client, logger: logger).migrate(migrations) }
}

/// Prints a failure to standard error and exits non-zero (no stack of Swift types for an operator).
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
}
