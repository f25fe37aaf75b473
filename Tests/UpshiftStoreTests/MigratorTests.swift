import Foundation
import PostgresNIO
import Testing
import UpshiftStore
import UpshiftTestSupport

@Suite struct MigratorTests {
    /// A new, empty database (not cloned from the migrated template).
    func emptyDatabase() async throws -> DatabaseSettings {
        let server = try TestEnvironment.databaseSettings()
        let name = "ut_\(ProcessInfo.processInfo.processIdentifier)_m\(UInt32.random(in: 0...UInt32.max))"
        _ = try await withPostgres(server.with(database: "postgres"), maximumConnections: 1) { client in
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        return server.with(database: name)
    }

    @Test func appliesEachMigrationOnceInOrder() async throws {
        let database = try await emptyDatabase()
        let migrations = try Migration.load(from: TestPaths.migrations)
        try await withPostgres(database) { client in
            let migrator = Migrator(client: client, logger: TestEnvironment.logger)
            let first = try await migrator.migrate(migrations)
            #expect(first == migrations.map(\.name))
            let second = try await migrator.migrate(migrations)
            #expect(second.isEmpty)
            let rows = try await client.query("SELECT name FROM schema_migrations ORDER BY version")
            var names: [String] = []
            for try await name in rows.decode(String.self) { names.append(name) }
            #expect(names == migrations.map(\.name))
        }
    }

    @Test func anEditedAppliedFileFailsWithItsName() async throws {
        let database = try await emptyDatabase()
        let migrations = try Migration.load(from: TestPaths.migrations)
        var edited = migrations
        edited[1] = Migration(version: edited[1].version, name: edited[1].name, sql: edited[1].sql + "\n-- edited")
        let editedMigrations = edited
        try await withPostgres(database) { client in
            let migrator = Migrator(client: client, logger: TestEnvironment.logger)
            try await migrator.migrate(migrations)
            await #expect(throws: MigrationError.modified("0002_apps_and_keys.sql")) {
                try await migrator.migrate(editedMigrations)
            }
        }
    }

    @Test func aFailingMigrationLeavesNothingBehind() async throws {
        let database = try await emptyDatabase()
        let broken = [
            Migration(version: 1, name: "0001_ok.sql", sql: "CREATE TABLE one (x int);"),
            Migration(version: 2, name: "0002_broken.sql", sql: "CREATE TABLE two (x int); SELECT * FROM missing_table;"),
        ]
        try await withPostgres(database) { client in
            await #expect(throws: MigrationError.failed("0002_broken.sql", #"relation "missing_table" does not exist"#)) {
                try await Migrator(client: client, logger: TestEnvironment.logger).migrate(broken)
            }
            let rows = try await client.query("SELECT to_regclass('one') IS NOT NULL, to_regclass('two') IS NOT NULL")
            for try await (one, two) in rows.decode((Bool, Bool).self) {
                #expect(one)  // the first migration committed
                #expect(!two)  // the second rolled back as a whole
            }
        }
    }

    @Test func concurrentMigratorsSerialize() async throws {
        let database = try await emptyDatabase()
        let migrations = try Migration.load(from: TestPaths.migrations)
        let applied = try await withThrowingTaskGroup(of: [String].self) { group in
            for _ in 0..<4 {
                group.addTask {
                    try await withPostgres(database, maximumConnections: 1) { client in
                        try await Migrator(client: client, logger: TestEnvironment.logger).migrate(migrations)
                    }
                }
            }
            return try await group.reduce(into: [String]()) { $0 += $1 }
        }
        // Every migration was applied exactly once across the four migrators.
        #expect(applied.sorted() == migrations.map(\.name).sorted())
    }
}
