import Foundation
import Testing
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// Every value read at start is checked there: an invalid one stops `serve` with a message naming it.
@Suite(.serverTimeLimit) struct ConfigurationTests {
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
        ("UPSHIFT_HOST", "a\u{1}b"), ("UPSHIFT_HOST", "bad host"), ("UPSHIFT_HOST", "a..b"), ("UPSHIFT_HOST", "-a.example"),
        ("UPSHIFT_HOST", "256.1.1.1"), ("UPSHIFT_HOST", "http://0.0.0.0"), ("UPSHIFT_HOST", String(repeating: "a", count: 64)),
        ("UPSHIFT_WRITE_TIMEOUT", "0"), ("UPSHIFT_WRITE_TIMEOUT", "never"),
        ("UPSHIFT_OPENAPI_FILE", "/nonexistent/openapi.yaml"), ("UPSHIFT_MIGRATIONS_DIR", "/nonexistent/sql"),
        // Fewer than two generations of every projection and two more would let the runner stall.
        ("UPSHIFT_PROJECTION_POOL_CONNECTIONS", "9"), ("UPSHIFT_HOT_POOL_CONNECTIONS", "0"),
        ("UPSHIFT_METRICS_TOKEN", "short"), ("UPSHIFT_METRICS_TOKEN", String(repeating: "a", count: 40) + " b"),
        ("UPSHIFT_METRICS_TOKEN", String(repeating: "é", count: 40)), ("UPSHIFT_METRICS_TOKEN", String(repeating: "a", count: 257)),
        ("UPSHIFT_STORE_SYNC_INTERVAL", "0"), ("UPSHIFT_STORE_SYNC_INTERVAL", "hourly"),
        ("UPSHIFT_STORE_SYNC_INTERVAL", "2592001"), ("UPSHIFT_STORE_LOOKUP_URL", "itunes.apple.com/lookup"),
        ("UPSHIFT_STORE_LOOKUP_URL", "ftp://itunes.apple.com/lookup"),
        ("UPSHIFT_BACKFILL_CHUNK_EVENTS", "999"), ("UPSHIFT_BACKFILL_CHUNK_EVENTS", "2e6"),
        ("UPSHIFT_BACKFILL_ROWS_PER_WRITE", "99"), ("UPSHIFT_BACKFILL_ROWS_PER_WRITE", "20k"),
        // Less than one gzip post of events (1 MiB received, 1 MiB inflated) would refuse every such post.
        ("UPSHIFT_BODY_BUDGET_BYTES", "2097151"), ("UPSHIFT_BODY_BUDGET_BYTES", "32MiB"),
        ("UPSHIFT_PROJECTION_MAX_XID_SECONDS", "0.1"), ("UPSHIFT_PROJECTION_MAX_XID_SECONDS", "5s"),
        ("UPSHIFT_READER_CONCURRENCY", "0"), ("UPSHIFT_BACKTEST_CONCURRENCY", "65"), ("UPSHIFT_READER_RATE", "-1"),
        // Events up to 30 days old are still accepted: a month must outlive that.
        ("UPSHIFT_RETENTION_MONTHS", "1"), ("UPSHIFT_RETENTION_MONTHS", "0"), ("UPSHIFT_RETENTION_MONTHS", "six"),
        ("UPSHIFT_WEBHOOK_ALLOW_HTTP", "maybe"), ("UPSHIFT_WEBHOOK_ALLOW_PRIVATE", "2"), ("UPSHIFT_WEBHOOK_INTERVAL", "0"),
        ("UPSHIFT_PUBLIC_URL", "ftp://upshift.example.com"), ("UPSHIFT_PUBLIC_URL", "upshift.example.com"),
    ]

    /// The server-wide body budget: 32 MiB unless set.
    @Test func theBodyBudgetDefaultsTo32MiB() throws {
        #expect(try AppConfiguration.fromEnvironment(Self.base).connections.bodyBudgetBytes == 32 << 20)
        var environment = Self.base
        environment["UPSHIFT_BODY_BUDGET_BYTES"] = "2097152"
        #expect(try AppConfiguration.fromEnvironment(environment).connections.bodyBudgetBytes == 2 << 20)
    }

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

    /// Retention is off unless `UPSHIFT_RETENTION_MONTHS` is set, and then needs an absolute export folder;
    /// the folder alone (where erasures rewrite archives) must be absolute too.
    @Test func retentionNeedsAnAbsoluteExportFolder() throws {
        var environment = Self.base
        #expect(try AppConfiguration.fromEnvironment(environment).retention == nil)
        environment["UPSHIFT_EXPORT_DIR"] = "archives"
        #expect { try AppConfiguration.fromEnvironment(environment) } throws: { "\($0)".contains("UPSHIFT_EXPORT_DIR") }
        environment["UPSHIFT_EXPORT_DIR"] = "/srv/archives"
        let alone = try AppConfiguration.fromEnvironment(environment)
        #expect(alone.retention == nil && alone.exportDirectory?.path == "/srv/archives")
        environment["UPSHIFT_RETENTION_MONTHS"] = "3"
        for folder in [nil, "", "archives"] {
            environment["UPSHIFT_EXPORT_DIR"] = folder
            #expect { try AppConfiguration.fromEnvironment(environment) } throws: { "\($0)".contains("UPSHIFT_EXPORT_DIR") }
        }
        environment["UPSHIFT_EXPORT_DIR"] = "/var/lib/upshift/archives"
        let retention = try AppConfiguration.fromEnvironment(environment).retention
        #expect(retention?.months == 3 && retention?.directory.path == "/var/lib/upshift/archives")
        #expect(retention?.interval == .seconds(86_400))
    }

    /// The operator token is a secret: its errors name the variable and the rule, never the value.
    @Test func anInvalidOperatorTokenIsNotShown() throws {
        var environment = Self.base
        environment["UPSHIFT_METRICS_TOKEN"] = "secret-but-too-short"
        #expect {
            try AppConfiguration.fromEnvironment(environment)
        } throws: { error in
            "\(error)".contains("UPSHIFT_METRICS_TOKEN") && !"\(error)".contains("secret-but-too-short")
        }
        environment["UPSHIFT_METRICS_TOKEN"] = String(repeating: "k", count: 32)
        #expect(try AppConfiguration.fromEnvironment(environment).operatorToken == String(repeating: "k", count: 32))
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
        #expect(configuration.pools.projectionConnections == 12)
        environment["UPSHIFT_PROJECTION_POOL_CONNECTIONS"] = "14"
        #expect(try AppConfiguration.fromEnvironment(environment).pools.projectionConnections == 14)
        #expect(configuration.projections.backfillChunkEvents == 16_000_000)
        environment["UPSHIFT_BACKFILL_CHUNK_EVENTS"] = "2000000"
        #expect(try AppConfiguration.fromEnvironment(environment).projections.backfillChunkEvents == 2_000_000)
        #expect(configuration.projections.backfillRowsPerWrite == 20_000)
        environment["UPSHIFT_BACKFILL_ROWS_PER_WRITE"] = "5000"
        #expect(try AppConfiguration.fromEnvironment(environment).projections.backfillRowsPerWrite == 5_000)
        for host in ["0.0.0.0", "::", "::1", "localhost", "upshift-1.internal.example"] {
            environment["UPSHIFT_HOST"] = host
            #expect(try AppConfiguration.fromEnvironment(environment).host == host)
        }
        environment["UPSHIFT_WRITE_TIMEOUT"] = "1.5"
        #expect(try AppConfiguration.fromEnvironment(environment).connections.writeTimeout == .milliseconds(1_500))
        // The store sync is off unless an interval is given; it asks the lookup URL given, else Apple's.
        #expect(try AppConfiguration.fromEnvironment(environment).storeSync == nil)
        environment["UPSHIFT_STORE_SYNC_INTERVAL"] = "3600"
        #expect(try AppConfiguration.fromEnvironment(environment).storeSync?.interval == .seconds(3_600))
        #expect(try AppConfiguration.fromEnvironment(environment).storeSync?.importer.lookupURL == "https://itunes.apple.com/lookup")
        environment["UPSHIFT_STORE_LOOKUP_URL"] = "https://itunes.apple.com/de/lookup"
        #expect(try AppConfiguration.fromEnvironment(environment).storeSync?.importer.lookupURL == "https://itunes.apple.com/de/lookup")
    }

    /// Without `DATABASE_URL`, the `POSTGRES_*` variables: an empty or blank host is a mistake, named.
    @Test(arguments: ["", " ", "db host", "db\u{0}"])
    func anEmptyOrMalformedPostgresHostIsNamed(_ host: String) {
        #expect {
            try AppConfiguration.fromEnvironment(["POSTGRES_HOST": host])
        } throws: { error in
            "\(error)".contains("POSTGRES_HOST")
        }
        #expect((try? AppConfiguration.fromEnvironment(["POSTGRES_HOST": "db.internal"]))?.database.host == "db.internal")
    }

    /// What is wrong inside the migrations folder names the variable that points at it.
    @Test func aMigrationsFolderThatDoesNotReadIsNamed() throws {
        let folder = TestEnvironment.scratch("migrations")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        try Data("SELECT 1;".utf8).write(to: folder.appendingPathComponent("first.sql"))
        var configuration = try AppConfiguration.fromEnvironment(Self.base.merging(["UPSHIFT_MIGRATIONS_DIR": folder.path]) { $1 })
        #expect(configuration.migrationsDirectory?.path == folder.path)
        #expect {
            _ = try ApplicationParts(configuration)
        } throws: { error in
            "\(error)".contains("UPSHIFT_MIGRATIONS_DIR") && "\(error)".contains("first.sql")
        }
        #expect {
            _ = try Migration.configured(environment: ["UPSHIFT_MIGRATIONS_DIR": folder.path])
        } throws: { error in
            "\(error)".contains("UPSHIFT_MIGRATIONS_DIR")
        }
        // A folder that went away after the configuration was read.
        configuration.migrationsDirectory = folder.appendingPathComponent("gone")
        #expect {
            _ = try ApplicationParts(configuration)
        } throws: { error in
            "\(error)".contains("UPSHIFT_MIGRATIONS_DIR")
        }
    }

    /// A host name that passes its syntax but does not resolve fails when the server binds: that error
    /// names the variable too, and serve stops.
    @Test func aHostThatCannotBeListenedOnStopsServeNamingIt() async throws {
        let harness = try await Harness.make()
        // A name that does not resolve, and an address of no interface here (TEST-NET-1).
        for host in ["upshift.invalid", "192.0.2.1"] {
            let server = try ServerProcess(
                database: harness.database, port: try await freePort(), extraEnvironment: ["UPSHIFT_HOST": host])
            try server.process.run()
            server.process.waitUntilExit()
            #expect(server.process.terminationStatus != 0)
            #expect(server.log().contains("UPSHIFT_HOST"), "\(host): \(server.log().suffix(1_000))")
        }
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
