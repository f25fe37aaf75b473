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

    func run() async throws {
        var configuration: AppConfiguration
        do {
            configuration = try AppConfiguration.fromEnvironment(ProcessInfo.processInfo.environment)
            if let host { configuration.host = try AppConfiguration.parseHost(host, name: "--host") }
            if let port {
                guard (0...65535).contains(port) else { throw ValidationError("--port must be 0…65535") }
                configuration.port = port
            }
            if let roles { configuration.roles = try AppConfiguration.parseRoles(roles) }
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

