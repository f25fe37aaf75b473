import ArgumentParser
import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftStore

/// Runs `body` with a pool of PostgreSQL connections for the database of `DATABASE_URL` (or `POSTGRES_*`).
func withDatabase<T: Sendable>(_ body: @escaping @Sendable (DatabasePool, Logger) async throws -> T) async throws -> T {
    let settings: DatabaseSettings
    do {
        settings = try DatabaseSettings.fromEnvironment(ProcessInfo.processInfo.environment)
    } catch {
        throw ValidationError("\(error)")
    }
    return try await withDatabase(settings, body)
}

/// Runs `body` with a pool of two PostgreSQL connections for `settings`; a database error is a
/// `CommandFailure` with the server's message.
func withDatabase<T: Sendable>(
    _ settings: DatabaseSettings, _ body: @escaping @Sendable (DatabasePool, Logger) async throws -> T
) async throws -> T {
    var logger = Logger(label: "upshift")
    logger.logLevel = .error
    do {
        return try await Database.withPool(settings, logger: logger, body)
    } catch {
        throw CommandFailure(database: error) ?? error
    }
}

/// The numbered migrations of `directory`, else of UPSHIFT_MIGRATIONS_DIR, else those built into the binary.
func loadMigrations(from directory: String? = nil) throws -> [Migration] {
    if let directory { return try Migration.load(from: URL(fileURLWithPath: directory, isDirectory: true)) }
    return try Migration.configured()
}

/// Applies pending migrations; returns the names applied.
@discardableResult
func migrateDatabase(_ migrations: [Migration]) async throws -> [String] {
    try await withDatabase { pool, logger in try await Migrator(pool: pool, logger: logger).migrate(migrations) }
}

