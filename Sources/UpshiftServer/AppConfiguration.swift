import Foundation
import Logging
import Prometheus
import UpshiftCore
import UpshiftStore

/// What `upshift serve` does in this process (DESIGN.md section 9).
public enum ServerRole: String, Sendable, CaseIterable {
    /// The HTTP API, the ingestion writer and partition upkeep.
    case http
    /// The projection runner (active on one instance at a time).
    case projections
}

/// Everything the composition root needs to build the application, clock included.
public struct AppConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var database: DatabaseSettings
    public var roles: Set<ServerRole> = Set(ServerRole.allCases)
    public var logLevel: Logger.Level = .info
    /// Peers whose `X-Forwarded-For` is trusted (exact addresses).
    public var trustedProxies: Set<String> = []
    /// The application's one clock: the system clock in production.
    public var clock: any WallClock = SystemClock()
    /// The `sql/` folder of numbered migrations, applied at start.
    public var migrationsDirectory: URL?
    public var ingestion = IngestionSettings()
    public var check = CheckSettings()
    public var projections = ProjectionSettings()
    /// How long a looked-up key is trusted before it is read again: a revocation reaches every instance
    /// within this time.
    public var keyCacheSeconds: Double = 10
    /// Database connections of the pool.
    public var maximumConnections = 16
    public var metrics = PrometheusCollectorRegistry()

    public init(database: DatabaseSettings) {
        self.database = database
    }

    /// Reads `UPSHIFT_HOST`, `UPSHIFT_PORT`, `UPSHIFT_LOG_LEVEL`, `UPSHIFT_ROLES`, `UPSHIFT_TRUSTED_PROXIES`
    /// and the database variables.
    public static func fromEnvironment(_ environment: [String: String]) throws -> AppConfiguration {
        var configuration = AppConfiguration(database: try DatabaseSettings.fromEnvironment(environment))
        if let host = environment["UPSHIFT_HOST"], !host.isEmpty { configuration.host = host }
        if let port = environment["UPSHIFT_PORT"], !port.isEmpty {
            guard let value = Int(port), (0...65535).contains(value) else {
                throw ConfigurationError.invalid("UPSHIFT_PORT", port)
            }
            configuration.port = value
        }
        if let level = environment["UPSHIFT_LOG_LEVEL"], !level.isEmpty {
            guard let value = Logger.Level(rawValue: level.lowercased()) else {
                throw ConfigurationError.invalid("UPSHIFT_LOG_LEVEL", level)
            }
            configuration.logLevel = value
        }
        if let roles = environment["UPSHIFT_ROLES"], !roles.isEmpty {
            configuration.roles = try parseRoles(roles)
        }
        if let proxies = environment["UPSHIFT_TRUSTED_PROXIES"] {
            configuration.trustedProxies = Set(
                proxies.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty })
        }
        if let rate = environment["UPSHIFT_CHECK_RATE_LIMIT"], !rate.isEmpty {
            guard let value = Double(rate), value >= 0 else { throw ConfigurationError.invalid("UPSHIFT_CHECK_RATE_LIMIT", rate) }
            configuration.check.ratePerClient = value
            configuration.check.burstPerClient = max(1, value * 3)
        }
        if let burst = environment["UPSHIFT_CHECK_RATE_BURST"], !burst.isEmpty {
            guard let value = Double(burst), value >= 1 else { throw ConfigurationError.invalid("UPSHIFT_CHECK_RATE_BURST", burst) }
            configuration.check.burstPerClient = value
        }
        configuration.migrationsDirectory = Migration.locateDirectory(environment: environment)
        return configuration
    }

    /// Parses `http,projections`.
    public static func parseRoles(_ text: String) throws -> Set<ServerRole> {
        var roles = Set<ServerRole>()
        for name in text.split(separator: ",") {
            let trimmed = name.trimmingCharacters(in: .whitespaces)
            guard let role = ServerRole(rawValue: trimmed) else {
                throw ConfigurationError.invalid("UPSHIFT_ROLES", String(name))
            }
            roles.insert(role)
        }
        guard !roles.isEmpty else { throw ConfigurationError.invalid("UPSHIFT_ROLES", text) }
        return roles
    }
}

/// How the ingestion writer batches (group commit).
public struct IngestionSettings: Sendable {
    /// Flushes that may be in flight at once; each takes everything pending when it starts.
    public var concurrentFlushes = 3
    /// The most events one `INSERT` carries.
    public var maximumBatchEvents = 5_000
    /// Events waiting beyond this answer `503` at once (overload), rather than queueing without bound.
    public var maximumPendingEvents = 50_000
    /// How long one flush may take before its requests answer `503`.
    public var flushTimeout: Duration = .seconds(3)
    /// After a failed flush, requests answer `503` at once for this long (the database is down).
    public var failFastAfterError: Duration = .seconds(1)

    public init() {}
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String

    public static func invalid(_ name: String, _ value: String) -> ConfigurationError {
        ConfigurationError(description: "\(name) has an invalid value: \(value)")
    }
}

/// The system clock, for production.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
