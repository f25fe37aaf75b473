import Foundation
import Logging
import NIOCore
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
    public var migrationsDirectory: URL? {
        didSet {
            if openAPIFile == nil, let beside = migrationsDirectory.map(OpenAPIDocument.beside),
                FileManager.default.isReadableFile(atPath: beside.path)
            {
                openAPIFile = beside
            }
        }
    }
    /// The API's description, served at `GET /openapi.yaml`: `UPSHIFT_OPENAPI_FILE`, else
    /// `docs/openapi.yaml` beside the `sql/` folder when there is one, else the copy built in.
    public var openAPIFile: URL?
    public var ingestion = IngestionSettings()
    public var check = CheckSettings()
    public var projections = ProjectionSettings()
    public var connections = ConnectionLimits()
    /// How often the server asks whether a key was created or revoked (then it reloads them all): a
    /// revocation reaches every instance within this time.
    public var keyRefresh: Duration = .seconds(1)
    /// Database connections of the pool.
    public var maximumConnections = 16
    public var metrics = PrometheusCollectorRegistry()

    public init(database: DatabaseSettings) {
        self.database = database
    }

    /// Reads the `UPSHIFT_*` variables of the README's configuration table and the database variables.
    /// Every value is checked here, so that an invalid one stops `serve` with a message naming it and
    /// nothing traps later.
    public static func fromEnvironment(_ environment: [String: String]) throws -> AppConfiguration {
        var configuration = AppConfiguration(database: try DatabaseSettings.fromEnvironment(environment))
        let read = EnvironmentReader(environment)
        if let host = try read.text("UPSHIFT_HOST") { configuration.host = try parseHost(host, name: "UPSHIFT_HOST") }
        if let port = try read.integer("UPSHIFT_PORT", in: 0...65535) { configuration.port = port }
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
            configuration.trustedProxies = try parseTrustedProxies(proxies)
        }
        // Rates: a decimal ≥ 0 (0 turns a limit off); bursts: a decimal ≥ 1.
        if let rate = try read.decimal("UPSHIFT_CHECK_RATE_LIMIT", in: 0...1_000_000_000) {
            configuration.check.ratePerClient = RateLimit(rate: rate, burst: max(1, rate * 3))
        }
        if let burst = try read.decimal("UPSHIFT_CHECK_RATE_BURST", in: 1...1_000_000_000) {
            configuration.check.ratePerClient.burst = burst
        }
        // An event burst below one full batch would refuse every batch of 500.
        let eventBursts = Double(EventsController.maximumEvents)...1_000_000_000
        if let rate = try read.decimal("UPSHIFT_EVENTS_RATE_LIMIT", in: 0...1_000_000_000) {
            configuration.ingestion.ratePerClient.rate = rate
        }
        if let burst = try read.decimal("UPSHIFT_EVENTS_RATE_BURST", in: eventBursts) {
            configuration.ingestion.ratePerClient.burst = burst
        }
        if let rate = try read.decimal("UPSHIFT_EVENTS_KEY_RATE_LIMIT", in: 0...1_000_000_000) {
            configuration.ingestion.ratePerKey.rate = rate
        }
        if let burst = try read.decimal("UPSHIFT_EVENTS_KEY_RATE_BURST", in: eventBursts) {
            configuration.ingestion.ratePerKey.burst = burst
        }
        if let bytes = try read.integer("UPSHIFT_CHECK_CACHE_BYTES", in: 0...(1 << 40)) {
            configuration.check.cacheBytes = bytes
        }
        if let timeout = try read.seconds("UPSHIFT_HEAD_TIMEOUT") { configuration.connections.headTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_BODY_TIMEOUT") { configuration.connections.bodyTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_IDLE_TIMEOUT") { configuration.connections.idleTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_WRITE_TIMEOUT") { configuration.connections.writeTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_SHUTDOWN_TIMEOUT") { configuration.connections.shutdownTimeout = timeout }
        if let count = try read.integer("UPSHIFT_MAX_CONNECTIONS", in: 1...1_000_000) {
            configuration.connections.maximumConnections = count
        }
        if let bytes = try read.integer("UPSHIFT_MAX_HEAD_BYTES", in: 1024...(1 << 20)) {
            configuration.connections.maximumHeadBytes = bytes
        }
        if let format = environment["UPSHIFT_LOG_FORMAT"], !format.isEmpty, !["json", "text"].contains(format.lowercased()) {
            throw ConfigurationError.invalid("UPSHIFT_LOG_FORMAT", format)
        }
        if let file = try read.text("UPSHIFT_OPENAPI_FILE") {
            guard FileManager.default.isReadableFile(atPath: file) else {
                throw ConfigurationError.invalid("UPSHIFT_OPENAPI_FILE", file, expected: "a readable file")
            }
            configuration.openAPIFile = URL(fileURLWithPath: file)
        }
        if let directory = Migration.locateDirectory(environment: environment) {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: directory.path, isDirectory: &isDirectory), isDirectory.boolValue else {
                throw ConfigurationError.invalid(
                    "UPSHIFT_MIGRATIONS_DIR", directory.path, expected: "a folder of numbered migrations, NNNN_name.sql")
            }
            configuration.migrationsDirectory = directory
        }
        return configuration
    }

    /// The address to listen on: an IPv4 or IPv6 address, or a host name (RFC 1123: dot-separated
    /// labels of letters, digits and `-`, at most 63 bytes each and 253 in all). `name` is what an
    /// error names (`UPSHIFT_HOST`, `--host`). Whether a name resolves is known only when the server
    /// binds; that error names the variable too.
    public static func parseHost(_ text: String, name: String) throws -> String {
        if (try? SocketAddress(ipAddress: text, port: 0)) != nil { return text }
        let labels = text.split(separator: ".", omittingEmptySubsequences: false)
        let isName =
            (1...253).contains(text.utf8.count)
            && labels.allSatisfy { label in
                (1...63).contains(label.utf8.count) && label.first != "-" && label.last != "-"
                    && label.utf8.allSatisfy { byte in
                        (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                            || byte == UInt8(ascii: "-")
                    }
            }
            // All digits and dots is an IPv4 address that did not parse (`256.1.1.1`), not a name.
            && !text.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }
        guard isName else {
            throw ConfigurationError.invalid(name, text, expected: "an IP address or a host name")
        }
        return text
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

    /// Comma-separated IPv4 or IPv6 addresses, each as the TCP peer's address is written.
    public static func parseTrustedProxies(_ text: String) throws -> Set<String> {
        var proxies = Set<String>()
        for entry in text.split(separator: ",") {
            let address = entry.trimmingCharacters(in: .whitespaces)
            guard !address.isEmpty else { continue }
            guard let parsed = try? SocketAddress(ipAddress: address, port: 0), let canonical = parsed.ipAddress else {
                throw ConfigurationError.invalid("UPSHIFT_TRUSTED_PROXIES", address)
            }
            proxies.insert(canonical)
        }
        return proxies
    }
}

/// Reads typed values from the environment; a value that does not parse, or lies outside its range,
/// is an error naming the variable.
struct EnvironmentReader {
    let environment: [String: String]

    init(_ environment: [String: String]) {
        self.environment = environment
    }

    private func value(_ name: String) -> String? {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        return text
    }

    func text(_ name: String) throws -> String? {
        guard let text = value(name) else { return nil }
        guard TextRules.violation(in: text, lineBreaks: false) == nil, text.utf8.count <= 255 else {
            throw ConfigurationError.invalid(name, text)
        }
        return text
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = TextRules.integer(text, in: range) else {
            throw ConfigurationError.invalid(name, text, expected: "an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func decimal(_ name: String, in range: ClosedRange<Double>) throws -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw ConfigurationError.invalid(
                name, text, expected: "a number from \(range.lowerBound.formatted()) to \(range.upperBound.formatted())")
        }
        return number
    }

    /// Seconds, a decimal from 0.001 to 86,400.
    func seconds(_ name: String) throws -> Duration? {
        guard let seconds = try decimal(name, in: 0.001...86_400) else { return nil }
        return .milliseconds(Int64((seconds * 1000).rounded()))
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
    /// Events per second per client address (IPv6: per /64), and the burst (README "Security" shows the
    /// arithmetic): 1,000 installs behind one carrier-grade NAT address, each sending what the SDK sends
    /// at most.
    public var ratePerClient = RateLimit(rate: 100, burst: 10_000)
    /// Events per second per ingest key, and the burst: an app of 10 M installs.
    public var ratePerKey = RateLimit(rate: 10_000, burst: 100_000)

    public init() {}
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String

    public static func invalid(_ name: String, _ value: String, expected: String? = nil) -> ConfigurationError {
        ConfigurationError(description: "\(name) has an invalid value: \(value)" + (expected.map { " (expected \($0))" } ?? ""))
    }
}
