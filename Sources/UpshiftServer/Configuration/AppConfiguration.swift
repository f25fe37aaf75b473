import Foundation
import Logging
import NIOCore
import UpshiftCore
import UpshiftStore

/// Everything the composition root needs to build the application, clock included.
public struct AppConfiguration: Sendable {
    public var host: String = "127.0.0.1"
    public var port: Int = 8080
    public var database: DatabaseSettings
    /// Where the reports and the dashboard's charts and tables read the projections: a streaming
    /// replica of `database` (`UPSHIFT_REPORTS_DATABASE_URL`), or nil to read them on `database`.
    /// Everything else reads and writes `database`.
    public var reportsDatabase: DatabaseSettings?
    public var roles: Set<ServerRole> = Set(ServerRole.allCases)
    public var logLevel: Logger.Level = .info
    /// Peers whose `X-Forwarded-For` is trusted (exact addresses).
    public var trustedProxies: Set<String> = []
    /// When set, `/metrics` and `/health/db` answer only `Authorization: Bearer <token>` (`401` else).
    public var operatorToken: String?
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
    public var dashboard = DashboardSettings()
    public var readers = ReaderSettings()
    public var projections = ProjectionSettings()
    public var connections = ConnectionLimits()
    /// How often the server asks whether a key was created or revoked (then it reloads them all): a
    /// revocation reaches every instance within this time.
    public var keyRefresh: Duration = .seconds(1)
    public var pools = DatabasePoolSettings()
    /// The background import of App Store versions (`UPSHIFT_STORE_SYNC_INTERVAL`); nil: off.
    public var storeSync: AppStoreSyncSettings?
    /// Where `upshift releases import` and the store sync ask the App Store (`UPSHIFT_STORE_LOOKUP_URL`).
    public var storeLookup = AppStoreImporter.Settings()
    /// Retention of the event log (`UPSHIFT_RETENTION_MONTHS`); nil: the log keeps everything.
    public var retention: RetentionSettings?
    /// `UPSHIFT_EXPORT_DIR`: where the archives of closed months are (retention's, and by default
    /// `upshift log export --month`'s); an erasure rewrites those that hold the install.
    public var exportDirectory: URL?
    /// Where and how webhooks are delivered (`UPSHIFT_WEBHOOK_*`).
    public var webhooks = WebhookSettings()

    public init(database: DatabaseSettings) {
        self.database = database
    }

    /// Reads the `UPSHIFT_*` variables of docs/OPERATIONS.md's configuration table and the database variables.
    /// Every value is checked here, so that an invalid one stops `serve` with a message naming it and
    /// nothing traps later.
    /// The `UPSHIFT_WEBHOOK_*` variables, as `serve` reads them (and `upshift webhooks create`, which checks a
    /// URL as the server does).
    public static func webhookSettings(_ environment: [String: String]) throws -> WebhookSettings {
        let read = EnvironmentReader(environment)
        var settings = WebhookSettings()
        if let allow = try read.flag("UPSHIFT_WEBHOOK_ALLOW_HTTP") { settings.allowHTTP = allow }
        if let allow = try read.flag("UPSHIFT_WEBHOOK_ALLOW_PRIVATE") { settings.allowPrivate = allow }
        if let interval = try read.seconds("UPSHIFT_WEBHOOK_INTERVAL") { settings.interval = interval }
        if let url = try read.text("UPSHIFT_PUBLIC_URL") {
            guard let parsed = URLComponents(string: url), ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""),
                parsed.host?.isEmpty == false, parsed.query == nil, parsed.fragment == nil
            else {
                throw ConfigurationError.invalid("UPSHIFT_PUBLIC_URL", url, expected: "an http or https URL such as https://upshift.example.com")
            }
            settings.publicURL = url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        return settings
    }

    public static func fromEnvironment(_ environment: [String: String]) throws -> AppConfiguration {
        var configuration = AppConfiguration(database: try DatabaseSettings.fromEnvironment(environment))
        let read = EnvironmentReader(environment)
        if let url = environment["UPSHIFT_REPORTS_DATABASE_URL"], !url.isEmpty {
            configuration.reportsDatabase = try parseDatabaseURL(url, name: "UPSHIFT_REPORTS_DATABASE_URL")
        }
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
        if let token = environment["UPSHIFT_METRICS_TOKEN"], !token.isEmpty {
            // A secret: the message names the rule, never the value.
            guard (32...256).contains(token.utf8.count),
                token.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F })
            else {
                throw ConfigurationError.invalid(
                    "UPSHIFT_METRICS_TOKEN", "(not shown)", expected: "32 to 256 visible ASCII characters, no spaces")
            }
            configuration.operatorToken = token
        }
        // Rates: a decimal ≥ 0 (0 turns a limit off); bursts: a decimal ≥ 1.
        if let rate = try read.decimal("UPSHIFT_CHECK_RATE_LIMIT", in: 0...1_000_000_000) {
            configuration.check.ratePerClient = RateLimit(rate: rate, burst: max(1, rate * 3))
        }
        if let burst = try read.decimal("UPSHIFT_CHECK_RATE_BURST", in: 1...1_000_000_000) {
            configuration.check.ratePerClient.burst = burst
        }
        if let rate = try read.decimal("UPSHIFT_READER_RATE", in: 0...1_000_000_000) {
            configuration.readers.ratePerToken = RateLimit(rate: rate, burst: max(1, rate * 3))
        }
        if let burst = try read.decimal("UPSHIFT_READER_RATE_BURST", in: 1...1_000_000_000) {
            configuration.readers.ratePerToken.burst = burst
        }
        if let count = try read.integer("UPSHIFT_READER_CONCURRENCY", in: 1...10_000) {
            configuration.readers.concurrencyPerToken = count
        }
        if let count = try read.integer("UPSHIFT_BACKTEST_CONCURRENCY", in: 1...64) {
            configuration.readers.backtestConcurrency = count
        }
        if let rate = try read.decimal("UPSHIFT_DASHBOARD_RATE_LIMIT", in: 0...1_000_000_000) {
            configuration.dashboard.ratePerClient.rate = rate
        }
        if let burst = try read.decimal("UPSHIFT_DASHBOARD_RATE_BURST", in: 1...1_000_000_000) {
            configuration.dashboard.ratePerClient.burst = burst
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
        // At least one gzip post of events (1 MiB received, 1 MiB inflated) must fit.
        if let bytes = try read.integer("UPSHIFT_BODY_BUDGET_BYTES", in: (2 * BodyBudget.perBody)...(1 << 40)) {
            configuration.connections.bodyBudgetBytes = bytes
        }
        if let count = try read.integer("UPSHIFT_HOT_POOL_CONNECTIONS", in: 1...1_000) {
            configuration.pools.hotConnections = count
        }
        if let count = try read.integer("UPSHIFT_READ_POOL_CONNECTIONS", in: 1...1_000) {
            configuration.pools.readConnections = count
        }
        if let count = try read.integer(
            "UPSHIFT_PROJECTION_POOL_CONNECTIONS", in: DatabasePoolSettings.minimumProjectionConnections...1_000) {
            configuration.pools.projectionConnections = count
        }
        if let events = try read.integer("UPSHIFT_BACKFILL_CHUNK_EVENTS", in: 1_000...1_000_000_000) {
            configuration.projections.backfillChunkEvents = events
        }
        if let seconds = try read.decimal("UPSHIFT_ERASURE_INTERVAL", in: 0.1...86_400) {
            configuration.projections.erasurePass = .milliseconds(Int64((seconds * 1_000).rounded()))
        }
        if let seconds = try read.decimal("UPSHIFT_RULES_INTERVAL", in: 1...86_400) {
            configuration.projections.rulesInterval = seconds
        }
        if let seconds = try read.decimal("UPSHIFT_PROJECTION_MAX_XID_SECONDS", in: 0.5...300) {
            configuration.projections.maximumXidHold = .milliseconds(Int64(seconds * 1_000))
        }
        if let rows = try read.integer("UPSHIFT_BACKFILL_ROWS_PER_WRITE", in: 100...10_000_000) {
            configuration.projections.backfillRowsPerWrite = rows
        }
        if let timeout = try read.seconds("UPSHIFT_POOL_WAIT_TIMEOUT") { configuration.pools.waitTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_DATABASE_TIMEOUT") { configuration.pools.answerTimeout = timeout }
        if let timeout = try read.seconds("UPSHIFT_REPORT_STATEMENT_TIMEOUT") {
            configuration.pools.reportStatementTimeout = timeout
        }
        if let url = try read.text("UPSHIFT_STORE_LOOKUP_URL") {
            configuration.storeLookup.lookupURL = try AppStoreImporter.Settings.lookupURL(url, name: "UPSHIFT_STORE_LOOKUP_URL")
        }
        if let seconds = try read.decimal("UPSHIFT_STORE_SYNC_INTERVAL", in: 1...2_592_000) {
            var sync = AppStoreSyncSettings(interval: .milliseconds(Int64((seconds * 1000).rounded())))
            sync.importer = configuration.storeLookup
            configuration.storeSync = sync
        }
        if let folder = try read.text("UPSHIFT_EXPORT_DIR") {
            guard folder.hasPrefix("/") else {
                throw ConfigurationError.invalid("UPSHIFT_EXPORT_DIR", folder, expected: "an absolute path")
            }
            configuration.exportDirectory = URL(fileURLWithPath: folder, isDirectory: true)
        }
        if let months = try read.integer("UPSHIFT_RETENTION_MONTHS", in: 0...1_200) {
            guard months >= RetentionSettings.minimumMonths else {
                throw ConfigurationError.invalid(
                    "UPSHIFT_RETENTION_MONTHS", String(months),
                    expected: "at least \(RetentionSettings.minimumMonths): events up to 30 days old are still accepted")
            }
            guard let folder = configuration.exportDirectory else {
                throw ConfigurationError(
                    description: "UPSHIFT_RETENTION_MONTHS needs UPSHIFT_EXPORT_DIR: an absolute path to the folder each month is archived in before it is dropped")
            }
            var retention = RetentionSettings(months: months, directory: folder)
            if let seconds = try read.decimal("UPSHIFT_RETENTION_INTERVAL", in: 1...86_400) {
                retention.interval = .milliseconds(Int64((seconds * 1000).rounded()))
            }
            configuration.retention = retention
        }
        configuration.webhooks = try webhookSettings(environment)
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

    /// A `postgres://` URL read as `DATABASE_URL` is, its errors naming `name` (never the URL, which
    /// may hold a password).
    public static func parseDatabaseURL(_ text: String, name: String) throws -> DatabaseSettings {
        do {
            return try DatabaseSettings(url: text)
        } catch DatabaseSettings.ParseError.invalidURL(let reason) {
            throw ConfigurationError(description: "\(name) is not a postgres:// URL: \(reason)")
        }
    }

    /// Parses `http,projections`.
    public static func parseRoles(_ text: String, name: String = "UPSHIFT_ROLES") throws -> Set<ServerRole> {
        var roles = Set<ServerRole>()
        for entry in text.split(separator: ",") {
            let trimmed = entry.trimmingCharacters(in: .whitespaces)
            guard let role = ServerRole(rawValue: trimmed) else {
                throw ConfigurationError.invalid(name, String(entry))
            }
            roles.insert(role)
        }
        guard !roles.isEmpty else { throw ConfigurationError.invalid(name, text) }
        return roles
    }

    /// Comma-separated IPv4 or IPv6 addresses, each as the TCP peer's address is written.
    public static func parseTrustedProxies(_ text: String, name: String = "UPSHIFT_TRUSTED_PROXIES") throws -> Set<String> {
        var proxies = Set<String>()
        for entry in text.split(separator: ",") {
            let address = entry.trimmingCharacters(in: .whitespaces)
            guard !address.isEmpty else { continue }
            guard let parsed = try? SocketAddress(ipAddress: address, port: 0), let canonical = parsed.ipAddress else {
                throw ConfigurationError.invalid(name, address)
            }
            proxies.insert(canonical)
        }
        return proxies
    }
}

