import Foundation
import Testing
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// Every value read at start is checked there: an invalid one stops `serve` with a message naming it.
@Suite struct ConfigurationTests {
    static let base = ["DATABASE_URL": "postgres://postgres@127.0.0.1:5432/upshift"]

    static let invalid: [(String, String)] = [
        ("UPSHIFT_PORT", "65536"), ("UPSHIFT_PORT", "http"), ("UPSHIFT_PORT", "1e3"), ("UPSHIFT_LOG_LEVEL", "loud"),
        ("UPSHIFT_ROLES", "http,cooking"), ("UPSHIFT_TRUSTED_PROXIES", "10.0.0.1,proxy.local"),
        ("UPSHIFT_CHECK_RATE_LIMIT", "-1"), ("UPSHIFT_CHECK_RATE_LIMIT", "nan"), ("UPSHIFT_CHECK_RATE_LIMIT", "1e400"),
        ("UPSHIFT_CHECK_RATE_BURST", "0.5"), ("UPSHIFT_EVENTS_RATE_LIMIT", "inf"), ("UPSHIFT_EVENTS_RATE_BURST", "499"),
        ("UPSHIFT_EVENTS_KEY_RATE_LIMIT", "fast"), ("UPSHIFT_EVENTS_KEY_RATE_BURST", "1e19"),
        ("UPSHIFT_CHECK_CACHE_BYTES", "-1"), ("UPSHIFT_CHECK_CACHE_BYTES", "64MiB"), ("UPSHIFT_HEAD_TIMEOUT", "0"),
        ("UPSHIFT_BODY_TIMEOUT", "1e12"), ("UPSHIFT_IDLE_TIMEOUT", "-5"), ("UPSHIFT_SHUTDOWN_TIMEOUT", "soon"),
        ("UPSHIFT_MAX_CONNECTIONS", "0"), ("UPSHIFT_MAX_CONNECTIONS", "9223372036854775808"),
        ("UPSHIFT_MAX_HEAD_BYTES", "100"), ("UPSHIFT_LOG_FORMAT", "xml"), ("DATABASE_URL", "postgres://h:99999/db"),
        ("UPSHIFT_HOST", "a\u{1}b"),
    ]

    @Test(arguments: invalid)
    func anInvalidValueIsAnErrorNamingItsVariable(_ name: String, _ value: String) {
        var environment = Self.base
        environment[name] = value
        #expect {
            try AppConfiguration.fromEnvironment(environment)
        } throws: { error in
            "\(error)".contains(name) || (name == "DATABASE_URL" && error is DatabaseSettings.ParseError)
        }
    }

    @Test func validValuesAreRead() throws {
        var environment = Self.base
        environment["UPSHIFT_SHUTDOWN_TIMEOUT"] = "2.5"
        environment["UPSHIFT_CHECK_CACHE_BYTES"] = "1048576"
        environment["UPSHIFT_EVENTS_RATE_LIMIT"] = "0"
        environment["UPSHIFT_TRUSTED_PROXIES"] = "10.0.0.1, ::1"
        environment["UPSHIFT_MAX_CONNECTIONS"] = "10"
        let configuration = try AppConfiguration.fromEnvironment(environment)
        #expect(configuration.connections.shutdownTimeout == .milliseconds(2_500))
        #expect(configuration.check.cacheBytes == 1 << 20)
        #expect(configuration.ingestion.ratePerClient.rate == 0)
        #expect(configuration.trustedProxies == ["10.0.0.1", "::1"])
        #expect(configuration.connections.maximumConnections == 10)
    }

    @Test func serveStopsAtOnceWithTheVariableNamed() async throws {
        let harness = try await Harness.make()
        let server = try ServerProcess(
            database: harness.database, port: try await freePort(), extraEnvironment: ["UPSHIFT_BODY_TIMEOUT": "forever"])
        try server.process.run()
        server.process.waitUntilExit()
        #expect(server.process.terminationStatus != 0)
        #expect(server.log().contains("UPSHIFT_BODY_TIMEOUT"))
    }
}
