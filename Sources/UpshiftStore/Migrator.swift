import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// One numbered SQL file of `sql/`, e.g. `0001_event_log.sql`.
public struct Migration: Sendable, Equatable {
    public var version: Int
    public var name: String
    public var sql: String
    /// Hex SHA-256 of the file's bytes: an applied file must never change.
    public var checksum: String

    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.checksum = SHA256Hex.digest(Data(sql.utf8))
    }

    /// Reads `NNNN_name.sql` files of `directory`, in version order.
    public static func load(from directory: URL) throws -> [Migration] {
        let files = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".sql") }
        return try ordered(
            files.map { file in (file, try String(contentsOf: directory.appendingPathComponent(file), encoding: .utf8)) })
    }

    /// The migrations of the repository's `sql/` folder as this binary was built with them (the EmbedFiles
    /// plugin compiles them in), so that `upshift` needs no folder at run time.
    public static func embedded() throws -> [Migration] {
        try ordered(
            embeddedFiles.map { file in
                guard let data = Data(base64Encoded: file.base64) else { throw MigrationError.badFileName(file.name) }
                return (file.name, String(decoding: data, as: UTF8.self))
            })
    }

    /// `UPSHIFT_MIGRATIONS_DIR` when set, else the migrations built in.
    public static func configured(environment: [String: String] = ProcessInfo.processInfo.environment) throws -> [Migration] {
        try locateDirectory(environment: environment).map(load(fromConfigured:)) ?? embedded()
    }

    /// The migrations of the folder `UPSHIFT_MIGRATIONS_DIR` names; what goes wrong says so, with the
    /// variable's name (an operator set it, and may have set it wrong).
    public static func load(fromConfigured directory: URL) throws -> [Migration] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw MigrationError.directory(directory.path, "there is no folder there")
        }
        do {
            return try load(from: directory)
        } catch let error as MigrationError {
            throw MigrationError.directory(directory.path, error.description)
        } catch {
            throw MigrationError.directory(directory.path, "\(error)")
        }
    }

    private static func ordered(_ files: [(name: String, sql: String)]) throws -> [Migration] {
        var migrations: [Migration] = []
        for (file, sql) in files {
            guard let prefix = file.split(separator: "_").first, let version = Int(prefix) else {
                throw MigrationError.badFileName(file)
            }
            migrations.append(Migration(version: version, name: file, sql: sql))
        }
        migrations.sort { $0.version < $1.version }
        for (a, b) in zip(migrations, migrations.dropFirst()) where a.version == b.version {
            throw MigrationError.duplicateVersion(a.name, b.name)
        }
        return migrations
    }

    /// A folder of migrations given at run time (`UPSHIFT_MIGRATIONS_DIR`): tests and operators who apply
    /// other files than those built in. Nil: the built-in ones are used.
    public static func locateDirectory(environment: [String: String] = ProcessInfo.processInfo.environment) -> URL? {
        guard let path = environment["UPSHIFT_MIGRATIONS_DIR"], !path.isEmpty else { return nil }
        return URL(fileURLWithPath: path, isDirectory: true)
    }
}

public enum MigrationError: Error, CustomStringConvertible, Equatable {
    case badFileName(String)
    case duplicateVersion(String, String)
    /// An applied file whose content changed since: never rewrite history, add a new file instead.
    case modified(String)
    /// A migration's SQL failed; nothing of it was applied.
    case failed(String, String)
    /// The folder `UPSHIFT_MIGRATIONS_DIR` names cannot be read as migrations.
    case directory(String, String)

    public var description: String {
        switch self {
        case .badFileName(let name): "migration file \(name) does not start with a number (NNNN_name.sql)"
        case .duplicateVersion(let a, let b): "migrations \(a) and \(b) have the same number"
        case .modified(let name):
            "migration \(name) was edited after it was applied (checksum differs); add a new migration instead"
        case .failed(let name, let message): "migration \(name) failed and was rolled back: \(message)"
        case .directory(let path, let reason): "UPSHIFT_MIGRATIONS_DIR (\(path)): \(reason)"
        }
    }
}

/// Applies migrations once each, in order, each in its own transaction, recorded with a checksum.
/// Concurrent migrators serialize on an advisory lock.
public struct Migrator: Sendable {
    static let lockKey: Int64 = 0x5550_5348_4946_5401  // "UPSHIFT" + 1

    let pool: DatabasePool
    let logger: Logger

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    /// Applies what is pending and returns the names applied now.
    @discardableResult
    public func migrate(_ migrations: [Migration]) async throws -> [String] {
        try await pool.withConnection { connection in
            try await connection.query("SELECT pg_advisory_lock(\(Self.lockKey))", logger: logger)
            do {
                let applied = try await apply(migrations, on: connection)
                try await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                return applied
            } catch {
                _ = try? await connection.query("SELECT pg_advisory_unlock(\(Self.lockKey))", logger: logger)
                throw error
            }
        }
    }

    private static func message(_ error: any Error) -> String {
        (error as? PSQLError)?.serverInfo?[.message] ?? String(describing: error)
    }

    private func apply(_ migrations: [Migration], on connection: StoreConnection) async throws -> [String] {
        try await connection.query(
            """
            CREATE TABLE IF NOT EXISTS schema_migrations (
                version    integer     PRIMARY KEY,
                name       text        NOT NULL,
                checksum   text        NOT NULL,
                applied_at timestamptz NOT NULL DEFAULT now()
            )
            """, logger: logger)
        var recorded: [Int: String] = [:]
        let rows = try await connection.query("SELECT version, checksum FROM schema_migrations", logger: logger)
        for try await (version, checksum) in rows.decode((Int, String).self) {
            recorded[version] = checksum
        }
        var applied: [String] = []
        for migration in migrations {
            if let checksum = recorded[migration.version] {
                guard checksum == migration.checksum else { throw MigrationError.modified(migration.name) }
                continue
            }
            let statements = SQLScript.statements(migration.sql)
            do {
                try await connection.transaction(logger: logger) { connection in
                    // A migration may rewrite a large table: not bound by the statement timeout of the
                    // pool it runs on (the server's hot pool sets one).
                    try await connection.query("SET LOCAL statement_timeout = 0", logger: logger)
                    for statement in statements {
                        try await connection.query(SQL(trustedText: statement), logger: logger)
                    }
                    try await connection.query(
                        """
                        INSERT INTO schema_migrations (version, name, checksum)
                        VALUES (\(migration.version), \(migration.name), \(migration.checksum))
                        """, logger: logger)
                }
            } catch {
                throw MigrationError.failed(migration.name, Self.message(error))
            }
            logger.info("applied migration", metadata: ["migration.name": "\(migration.name)"])
            applied.append(migration.name)
        }
        return applied
    }
}
