import Foundation
import NIOSSL
import PostgresNIO

/// Where PostgreSQL is (docs/OPERATIONS.md, "Configuration"): `DATABASE_URL`, or `POSTGRES_HOST`,
/// `POSTGRES_PORT`, `POSTGRES_USER`, `POSTGRES_PASSWORD`, `POSTGRES_DB`.
public struct DatabaseSettings: Sendable, Equatable {
    public var host: String
    public var port: Int
    public var username: String
    public var password: String?
    public var database: String
    /// `sslmode` of the URL: `disable`, `prefer` or `require`.
    public var tlsMode: String
    /// `connect_timeout` of the URL (whole seconds, as libpq reads it, 1–600): how long opening a connection
    /// may take, both the TCP connection and the whole (start-up and authentication included). Nil: 3 s for
    /// the TCP connection and 5 s for the whole.
    public var connectTimeout: Duration?

    /// How long opening a connection outside a pool may take in all (a CLI command's first, `serve`'s
    /// attempts at start).
    public var sessionTimeout: Duration { connectTimeout ?? .seconds(5) }

    /// How long the TCP connection may take (a PostgreSQL whose queue of connections to accept is full
    /// under load lets it wait).
    var socketTimeout: Duration { connectTimeout ?? .seconds(3) }

    public init(
        host: String = "127.0.0.1", port: Int = 5432, username: String = "postgres", password: String? = nil,
        database: String = "upshift", tlsMode: String = "disable"
    ) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
        self.tlsMode = tlsMode
    }

    static let sslModes = ["disable", "prefer", "require"]

    public enum ParseError: Error, CustomStringConvertible {
        case invalidURL(String)
        case invalidPort(String)
        case invalidSSLMode(String)
        case invalidHost(String)
        case missing

        public var description: String {
            switch self {
            case .invalidURL(let reason): "DATABASE_URL is not a postgres:// URL: \(reason)"
            case .invalidPort(let port): "POSTGRES_PORT must be a port number, not \(port)"
            case .invalidSSLMode(let mode): "POSTGRES_SSLMODE must be disable, prefer or require, not \(mode)"
            case .invalidHost(let host): "POSTGRES_HOST must be a host name or an IP address, not \"\(host)\""
            case .missing: "set DATABASE_URL (or POSTGRES_HOST and friends)"
            }
        }
    }

    /// Reads the settings from the environment.
    public static func fromEnvironment(_ environment: [String: String]) throws -> DatabaseSettings {
        if let url = environment["DATABASE_URL"], !url.isEmpty {
            return try DatabaseSettings(url: url)
        }
        guard let host = environment["POSTGRES_HOST"] else { throw ParseError.missing }
        // Empty, blank or with control characters: a mistake in the deployment, not a host.
        guard !host.trimmingCharacters(in: .whitespaces).isEmpty, host.utf8.count <= 255,
            !host.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == " " })
        else { throw ParseError.invalidHost(host) }
        var port = 5432
        if let text = environment["POSTGRES_PORT"], !text.isEmpty {
            guard let value = Int(text), (1...65535).contains(value) else { throw ParseError.invalidPort(text) }
            port = value
        }
        let sslmode = environment["POSTGRES_SSLMODE"] ?? "disable"
        guard Self.sslModes.contains(sslmode) else { throw ParseError.invalidSSLMode(sslmode) }
        return DatabaseSettings(
            host: host, port: port,
            username: environment["POSTGRES_USER"] ?? "postgres",
            password: environment["POSTGRES_PASSWORD"],
            database: environment["POSTGRES_DB"] ?? "upshift",
            tlsMode: sslmode)
    }

    /// Parses `postgres://user:password@host:port/database?sslmode=disable`.
    public init(url text: String) throws {
        guard let components = URLComponents(string: text),
            let scheme = components.scheme, scheme == "postgres" || scheme == "postgresql"
        else { throw ParseError.invalidURL("expected postgres://user@host:port/database") }
        guard let host = components.host, !host.isEmpty else { throw ParseError.invalidURL("no host") }
        let database = String(components.path.drop(while: { $0 == "/" }))
        let sslmode = components.queryItems?.first(where: { $0.name == "sslmode" })?.value ?? "disable"
        guard Self.sslModes.contains(sslmode) else {
            throw ParseError.invalidURL("sslmode must be disable, prefer or require")
        }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw ParseError.invalidURL("the port must be 1 to 65535") }
        var connectTimeout: Duration?
        if let text = components.queryItems?.first(where: { $0.name == "connect_timeout" })?.value {
            guard text.utf8.count <= 3, let seconds = Int(text), (1...600).contains(seconds) else {
                throw ParseError.invalidURL("connect_timeout must be whole seconds from 1 to 600")
            }
            connectTimeout = .seconds(seconds)
        }
        self.init(
            host: host, port: port,
            username: components.user?.removingPercentEncoding ?? "postgres",
            password: components.password?.removingPercentEncoding,
            database: database.isEmpty ? "upshift" : database.removingPercentEncoding ?? database,
            tlsMode: sslmode)
        self.connectTimeout = connectTimeout
    }

    /// The same server, another database (tests clone databases from a template).
    public func with(database: String) -> DatabaseSettings {
        var copy = self
        copy.database = database
        return copy
    }

    private var tls: PostgresClient.Configuration.TLS {
        switch tlsMode {
        case "require": .require(.makeClientConfiguration())
        case "prefer": .prefer(.makeClientConfiguration())
        default: .disable
        }
    }

    /// The settings every connection starts with. Commits are durable: `synchronous_commit` is `on`
    /// whatever the server's default. PostgreSQL probes a client that has been silent for 5 s, every
    /// second, and ends the session after 5 probes unanswered; data it sent that stays unacknowledged
    /// for 10 s ends it too: a session whose client vanished (a host lost, a partition) lets go of its
    /// locks within about 10 s, not the kernel's two hours (``LeaderHeartbeat``).
    private func startupParameters(applicationName: String) -> [(String, String)] {
        [
            ("synchronous_commit", "on"), ("application_name", applicationName),
            ("tcp_keepalives_idle", "5"), ("tcp_keepalives_interval", "1"), ("tcp_keepalives_count", "5"),
            ("tcp_user_timeout", "10000"),
        ]
    }

    /// A PostgresNIO client (pool) configuration.
    public func clientConfiguration(maximumConnections: Int = 20, applicationName: String = "upshift")
        -> PostgresClient.Configuration
    {
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.maximumConnections = maximumConnections
        configuration.options.connectTimeout = socketTimeout
        // No keep-alive queries on idle connections: in PostgresNIO 1.33.2 one that fires while the pool
        // shuts down runs on a connection already closed, and the pool's run() then never returns (an
        // instance that never stops). Idle connections close after the pool's 60 s idle timeout anyway.
        configuration.options.keepAliveBehavior = nil
        configuration.options.additionalStartupParameters = startupParameters(applicationName: applicationName)
        return configuration
    }

    /// The configuration of one connection outside a pool (the catalog listener, a diagnosis).
    public func connectionConfiguration(applicationName: String) throws -> PostgresConnection.Configuration {
        let tls: PostgresConnection.Configuration.TLS =
            switch tlsMode {
            case "require": .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case "prefer": .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            default: .disable
            }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: tls)
        configuration.options.connectTimeout = .init(socketTimeout)
        configuration.options.additionalStartupParameters = startupParameters(applicationName: applicationName)
        return configuration
    }
}
