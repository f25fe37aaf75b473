import ArgumentParser
import Foundation
import Hummingbird
import Logging
import UpshiftServer
import UpshiftStore

struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run the server: HTTP API, ingestion writer and projection runner (by UPSHIFT_ROLES).")

    @Option(help: "Address to listen on (UPSHIFT_HOST, default 127.0.0.1).") var host: String?
    @Option(help: "Port to listen on (UPSHIFT_PORT, default 8080).") var port: Int?
    @Option(help: "Comma-separated roles: http, projections (UPSHIFT_ROLES, default both).") var roles: String?
    @Option(help: "trace, debug, info, notice, warning, error or critical (UPSHIFT_LOG_LEVEL).") var logLevel: String?
    @Option(help: "Comma-separated peer addresses whose X-Forwarded-For is trusted (UPSHIFT_TRUSTED_PROXIES).")
    var trustedProxies: String?
    @Option(help: "postgres://user@host:port/database (DATABASE_URL). A password here shows in the process list: give it in POSTGRES_PASSWORD or the environment's DATABASE_URL.")
    var databaseURL: String?
    @Option(help: "Database host (POSTGRES_HOST); any --postgres-* flag sets the database by parts, in place of DATABASE_URL.")
    var postgresHost: String?
    @Option(help: "Database port (POSTGRES_PORT).") var postgresPort: String?
    @Option(help: "Database user (POSTGRES_USER).") var postgresUser: String?
    @Option(help: "Database name (POSTGRES_DB).") var postgresDb: String?

    /// The environment with the database flags in place of their variables (docs/OPERATIONS.md,
    /// "Configuration": flags override the environment): `--database-url` is `DATABASE_URL`; a `--postgres-*`
    /// flag without it sets the database by parts, so the environment's `DATABASE_URL` is left out and the
    /// other parts come from `POSTGRES_*`.
    func environment(_ base: [String: String]) -> [String: String] {
        var environment = base
        let parts = [("POSTGRES_HOST", postgresHost), ("POSTGRES_PORT", postgresPort), ("POSTGRES_USER", postgresUser), ("POSTGRES_DB", postgresDb)]
        if let databaseURL {
            environment["DATABASE_URL"] = databaseURL
        } else if parts.contains(where: { $0.1 != nil }) {
            environment["DATABASE_URL"] = nil
        }
        for case (let name, let value?) in parts { environment[name] = value }
        return environment
    }

    func run() async throws {
        var configuration: AppConfiguration
        do {
            configuration = try AppConfiguration.fromEnvironment(environment(ProcessInfo.processInfo.environment))
            if let host { configuration.host = try AppConfiguration.parseHost(host, name: "--host") }
            if let port {
                guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
                configuration.port = port
            }
            if let roles { configuration.roles = try AppConfiguration.parseRoles(roles, name: "--roles") }
            if let trustedProxies {
                configuration.trustedProxies = try AppConfiguration.parseTrustedProxies(trustedProxies, name: "--trusted-proxies")
            }
            if let logLevel {
                guard let level = Logger.Level(rawValue: logLevel.lowercased()) else { throw ValidationError("bad --log-level") }
                configuration.logLevel = level
            }
        } catch let error as ConfigurationError {
            throw ValidationError(error.description)
        }
        let level = configuration.logLevel
        let json = ProcessInfo.processInfo.environment["UPSHIFT_LOG_FORMAT"]?.lowercased() == "json"
        LoggingSystem.bootstrap { label in LineLogHandler(label: label, format: json ? .json : .text, logLevel: level) }
        let app = try await buildApplication(configuration)
        try await runUntilTerminated(app, configuration: configuration)
    }
}

