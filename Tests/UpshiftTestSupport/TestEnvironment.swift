import Foundation
import Logging
import PostgresNIO
import Synchronization
import UpshiftCore
import UpshiftStore

/// Where the tests find PostgreSQL, the migrations, the shared test data and the built binary.
/// Anything missing is a failure, never a skip (docs/TESTING.md, "fail rather than skip").
public enum TestEnvironment {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    /// The checkout (two folders above this file's folder).
    public static let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()

    public static var migrationsDirectory: URL { packageRoot.appendingPathComponent("sql", isDirectory: true) }

    /// The folders of the project's own Swift code: the package's and the benchmarks' package's.
    public static let codeFolders = ["Sources", "Tests", "Benchmarks/Sources", "Benchmarks/Tests"]

    /// Every `.swift` file under `folders` (relative to the checkout).
    public static func swiftFiles(in folders: [String] = codeFolders) -> [URL] {
        folders.flatMap { folder in
            let walker = FileManager.default.enumerator(at: packageRoot.appendingPathComponent(folder), includingPropertiesForKeys: nil)
            return (walker?.allObjects ?? []).compactMap { $0 as? URL }.filter { $0.pathExtension == "swift" }
        }
    }

    /// A path for one test's files, not yet created: `name-<UUID>` inside one folder of the test process,
    /// which is removed when the process exits, so that a suite run leaves nothing in the temporary
    /// directory (it used to leave hundreds of folders and logs behind).
    public static func scratch(_ name: String) -> URL {
        scratchRoot.appendingPathComponent("\(name)-\(UUID().uuidString)")
    }

    private static let scratchRoot: URL = {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: TestEnvironment.scratchRoot) }
        return root
    }()

    public static let logger: Logger = {
        var logger = Logger(label: "upshift-tests")
        logger.logLevel = ProcessInfo.processInfo.environment["UPSHIFT_TEST_LOG_LEVEL"].flatMap { Logger.Level(rawValue: $0) } ?? .critical
        return logger
    }()

    /// The server that `DATABASE_URL` names (scripts/test provisions it).
    public static func databaseSettings() throws -> DatabaseSettings {
        do {
            return try DatabaseSettings.fromEnvironment(ProcessInfo.processInfo.environment)
        } catch {
            throw Missing(description: "DATABASE_URL is not set: run the tests with scripts/test")
        }
    }

    /// The `upshift` executable built by `swift build` (`UPSHIFT_BIN`, else next to the test bundle).
    public static func binary() throws -> URL {
        if let path = ProcessInfo.processInfo.environment["UPSHIFT_BIN"], !path.isEmpty {
            return URL(fileURLWithPath: path)
        }
        for folder in [Bundle.main.bundleURL, Bundle.main.bundleURL.deletingLastPathComponent()] {
            let candidate = folder.appendingPathComponent("upshift")
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
        }
        let debug = packageRoot.appendingPathComponent(".build/debug/upshift")
        if FileManager.default.isExecutableFile(atPath: debug.path) { return debug }
        throw Missing(description: "the upshift binary is not built: run swift build (scripts/test does) or set UPSHIFT_BIN")
    }
}

/// A clock the test moves by hand.
public final class ManualClock: WallClock {
    private let current: Mutex<Date>

    public init(_ start: Date) {
        current = Mutex(start)
    }

    public func now() -> Date { current.withLock { $0 } }

    public func set(_ date: Date) { current.withLock { $0 = date } }

    public func advance(by seconds: TimeInterval) { current.withLock { $0 = $0.addingTimeInterval(seconds) } }
}

/// A PostgreSQL error with what it says: PostgresNIO's own description hides the server's message and
/// code ("Generic description to prevent accidental leakage"), which leaves a failed run unexplained.
public struct DatabaseError: Error, CustomStringConvertible {
    public let description: String

    public init(_ context: String, _ error: PSQLError) {
        description = "\(context): \(String(reflecting: error))"
    }

    /// Runs `body`; a `PSQLError` it throws leaves as a ``DatabaseError`` naming `context` and the
    /// error in full. Every other error leaves as itself.
    public static func revealing<T>(_ context: @autoclosure () -> String, _ body: () async throws -> T) async throws -> T {
        do {
            return try await body()
        } catch let error as PSQLError {
            throw DatabaseError(context(), error)
        }
    }
}

/// Runs `body` with a running client for `settings`.
public func withPostgres<T: Sendable>(
    _ settings: DatabaseSettings, maximumConnections: Int = 8,
    _ body: @Sendable (PostgresClient) async throws -> T
) async throws -> T {
    let client = PostgresClient(
        configuration: settings.clientConfiguration(maximumConnections: maximumConnections, applicationName: "upshift-tests"),
        backgroundLogger: TestEnvironment.logger)
    return try await Waits.named("withPostgres(\(settings.database)): the body and the client's end") {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await client.run() }
            defer { group.cancelAll() }
            return try await Waits.named("withPostgres(\(settings.database)): the body") {
                try await DatabaseError.revealing("a statement on \(settings.database)") { try await body(client) }
            }
        }
    }
}

/// Fresh databases for tests: one migrated template per test process, cloned per test (fast, isolated).
public actor TestDatabases {
    public static let shared = TestDatabases()

    private var template: Task<String, any Error>?
    private var counter = 0
    private let prefix = "ut_\(ProcessInfo.processInfo.processIdentifier)"

    /// A new database with every migration applied.
    public func fresh() async throws -> DatabaseSettings {
        let server = try TestEnvironment.databaseSettings()
        let template = try await migratedTemplate(server)
        counter += 1
        let name = "\(prefix)_\(counter)"
        try await withPostgres(server.with(database: "postgres"), maximumConnections: 1) { client in
            // The template's last session may still be closing on the server side: retry briefly.
            for attempt in 1...50 {
                do {
                    try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name) TEMPLATE \(template)"))
                    return
                } catch let error as PSQLError where error.serverInfo?[.sqlState] == "55006" && attempt < 50 {
                    try await Task.sleep(for: .milliseconds(100))
                }
            }
        }
        return server.with(database: name)
    }

    /// One template per process; concurrent callers wait for the same task (the actor is reentrant).
    private func migratedTemplate(_ server: DatabaseSettings) async throws -> String {
        if let template { return try await template.value }
        let task = Task { try await Self.makeTemplate(server, prefix: prefix) }
        template = task
        return try await task.value
    }

    private static func makeTemplate(_ server: DatabaseSettings, prefix: String) async throws -> String {
        let name = "\(prefix)_template"
        let admin = server.with(database: "postgres")
        try await withPostgres(admin, maximumConnections: 1) { client in
            // Databases left by earlier runs (their processes are gone) are dropped first.
            let rows = try await client.query("SELECT datname FROM pg_database WHERE datname LIKE 'ut\\_%'")
            var stale: [String] = []
            for try await database in rows.decode(String.self) { stale.append(database) }
            for database in stale {
                let pid = database.split(separator: "_").dropFirst().first.flatMap { Int32($0) } ?? 0
                if pid != ProcessInfo.processInfo.processIdentifier, kill(pid, 0) != 0 {
                    _ = try? await client.query(PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(database) WITH (FORCE)"))
                }
            }
            try await client.query(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        }
        let migrations = try Migration.load(from: TestEnvironment.migrationsDirectory)
        _ = try await withPostgres(server.with(database: name), maximumConnections: 1) { client in
            try await Migrator(client: client, logger: TestEnvironment.logger).migrate(migrations)
        }
        return name
    }
}
