import AsyncHTTPClient
import Foundation
import Hummingbird
import NIOCore
import NIOHTTP1
import PostgresNIO
import ServiceLifecycle
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// A fresh database with one app and a key of each scope, and a way to run the real application on it.
struct Harness {
    let database: DatabaseSettings
    let clock: ManualClock
    /// The app `make` created; an `empty` harness has none.
    let app: AppID?
    let ingestKey: String
    let readKey: String
    let adminKey: String
    /// An admin token that covers every app (creates apps).
    let rootKey: String

    var appId: AppID {
        guard let app else { preconditionFailure("an empty harness has no app") }
        return app
    }

    /// The test's database as `DATABASE_URL` spells it, for the CLI, `serve` and `psql`.
    var databaseURL: String { Self.url(of: database) }

    /// `database` as `DATABASE_URL` spells it: a new connection may take 30 s (`connect_timeout`), since a
    /// loaded two-core machine has taken longer than the default 5 s to open one.
    static func url(of database: DatabaseSettings) -> String {
        var url = "postgres://\(database.username)"
        if let password = database.password { url += ":\(password)" }
        return url + "@\(database.host):\(database.port)/\(database.database)?connect_timeout=30"
    }

    static func make(app appId: AppID = "expenses", now: Date = Date()) async throws -> Harness {
        let database = try await TestDatabases.shared.fresh()
        let keys = try await withPostgres(database) { client in
            let logger = TestEnvironment.logger
            _ = try await CatalogStore(client: client, logger: logger).createApp(
                AppInfo(id: appId, name: "Expenses"), actor: "tests", reason: nil, now: now)
            let store = KeyStore(client: client, logger: logger)
            let ingest = try await store.create(name: "ios-app", scope: .ingest, appId: appId, now: now).1
            let read = try await store.create(name: "reports", scope: .read, appId: nil, now: now).1
            let admin = try await store.create(name: "owner", scope: .admin, appId: appId, now: now).1
            let root = try await store.create(name: "root", scope: .admin, appId: nil, now: now).1
            return (ingest, read, admin, root)
        }
        return Harness(
            database: database, clock: ManualClock(now), app: appId, ingestKey: keys.0, readKey: keys.1,
            adminKey: keys.2, rootKey: keys.3)
    }

    /// A fresh database with no app yet and an admin token for every app (`rootKey`).
    static func empty(now: Date = Date()) async throws -> Harness {
        let database = try await TestDatabases.shared.fresh()
        let keys = try await withPostgres(database) { client in
            let store = KeyStore(client: client, logger: TestEnvironment.logger)
            let root = try await store.create(name: "root", scope: .admin, appId: nil, now: now).1
            let read = try await store.create(name: "reports", scope: .read, appId: nil, now: now).1
            return (root, read)
        }
        return Harness(
            database: database, clock: ManualClock(now), app: nil, ingestKey: "", readKey: keys.1, adminKey: keys.0,
            rootKey: keys.0)
    }

    func configuration() -> AppConfiguration {
        var configuration = AppConfiguration(database: database)
        configuration.port = 0
        configuration.clock = clock
        configuration.migrationsDirectory = TestEnvironment.migrationsDirectory
        configuration.logLevel = TestEnvironment.logger.logLevel
        // Suites run in parallel on two cores: a flush may wait its turn longer than in production.
        configuration.ingestion.flushTimeout = .seconds(30)
        // Likewise a connection (a new one is a PostgreSQL backend to fork) and an answer: some forty
        // servers share the machine. The suites that judge these bounds (HotPathTests,
        // OperatorMetricsTests) set their own.
        configuration.pools.waitTimeout = .seconds(15)
        configuration.pools.answerTimeout = .seconds(30)
        configuration.pools.reportStatementTimeout = .seconds(30)
        // Every test client speaks from loopback: tests of the event limits turn them on.
        configuration.ingestion.ratePerClient.rate = 0
        configuration.ingestion.ratePerKey.rate = 0
        configuration.dashboard.ratePerClient.rate = 0
        // Suites read with one token from many tasks at once: ReaderSharesTests asserts the shares.
        configuration.readers.ratePerToken.rate = 0
        configuration.readers.concurrencyPerToken = 10_000
        configuration.readers.backtestsPerToken = 10_000
        configuration.readers.backtestConcurrency = 64
        configuration.readers.backtestQueue = 10_000
        return configuration
    }

    /// Runs the application built by the composition root on a free port for the duration of `body`.
    ///
    /// Not HummingbirdTesting's live framework: that waits for the port forever, so an application that
    /// stops before it listens (a start-up that failed on a loaded machine) hung the whole run. Here it
    /// fails its test with the error it stopped on, and a shutdown that outlasts a minute is cancelled.
    func run<T: Sendable>(
        _ configuration: AppConfiguration? = nil, _ body: @Sendable (Server) async throws -> T
    ) async throws -> T {
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let test = "\(Test.current?.name ?? "a test") on \(database.database)"
        let app = try await buildApplication(configuration ?? self.configuration(), logger: TestEnvironment.logger) {
            if let port = $0.localAddress?.port { listening.yield(port) }
            listening.finish()
        }
        var group = ServiceGroupConfiguration(services: [app], logger: TestEnvironment.logger)
        group.maximumGracefulShutdownDuration = .seconds(60)
        let services = ServiceGroup(configuration: group)
        return try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask {
                defer { listening.finish() }
                try await services.run()
            }
            var port = ports.makeAsyncIterator()
            guard let port = await Waits.named("the port of \(test)", { await port.next() }) else {
                try await tasks.next()  // the error the application stopped on
                throw HarnessError("the application stopped before it listened")
            }
            do {
                let value = try await Waits.named("the body of \(test)") {
                    try await body(Server(port: port))
                }
                await services.triggerGracefulShutdown()
                try await Waits.named("the shutdown of \(test)") { try await tasks.waitForAll() }
                return value
            } catch {
                // Shut down before the error leaves the group: leaving it cancels the server's task, and a
                // connection accepted but not yet served then traps in NIO (apple/swift-nio#3481).
                await services.triggerGracefulShutdown()
                try? await tasks.waitForAll()
                throw (error as? PSQLError).map { DatabaseError(test, $0) } ?? error
            }
        }
    }

    /// Runs `body` with a client of this harness's database.
    func sql<T: Sendable>(_ body: @Sendable (PostgresClient) async throws -> T) async throws -> T {
        try await withPostgres(database, body)
    }

    func count(_ query: PostgresQuery) async throws -> Int {
        try await sql { client in
            for try await value in try await client.query(query).decode(Int.self) { return value }
            return 0
        }
    }

    /// Waits until every projection has an active generation and every generation has applied every
    /// committed event of the log.
    func waitForProjections(timeout: Duration = .seconds(120)) async throws {
        let expected = Projections.all.count
        try await Waits.until("projections caught up", timeout: timeout) {
            try await count(
                """
                SELECT CASE WHEN (SELECT count(*) FROM projections WHERE state = 'active') < \(expected) THEN -1
                       ELSE (SELECT count(*) FROM projections p WHERE p.state <> 'retired' AND EXISTS (
                                SELECT 1 FROM event_log e WHERE (e.tx_id, e.position) > (p.last_tx, p.last_pos)))
                       END::int8
                """) == 0
        }
    }
}

struct HarnessError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// A running server, spoken to over real HTTP.
struct Server: Sendable {
    let port: Int

    struct Reply: Sendable {
        var status: Int
        var headers: HTTPHeaders
        var body: Data

        /// The body as text (a problem, a page, a feed), for messages and pages.
        var text: String { String(decoding: body, as: UTF8.self) }

        func json() throws -> [String: Any] {
            try JSONSerialization.jsonObject(with: body) as? [String: Any] ?? [:]
        }

        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try JSONDecoder().decode(type, from: body)
        }

        func value() throws -> JSONValue {
            try JSONValue.parse(body)
        }

        var etag: String? { headers["ETag"].first }
    }

    /// How long a request may take by default: the untagged suites run at once on two cores, where an
    /// answer has taken over 30 s (what a test asserts of speed, it asserts itself; benchmarks measure it).
    static let patience = TimeAmount.seconds(90)

    /// The clients of every test. Each lets a pooled connection go after 20 s unused: well before the
    /// server's idle timeout (60 s) closes it, since a request sent on a connection the server is closing
    /// at that moment is reset (with both at 60 s, a test that waited a minute between requests failed).
    /// A request waits for one of a server's 8 pooled connections as long as it may wait for its answer
    /// (the pool's wait is bounded by the connect timeout, 10 s by default: fifty clients of one server on a
    /// loaded machine once waited longer).
    static let client = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(timeout: .init(connect: patience), connectionPool: .init(idleTimeout: .seconds(20))))
    /// As ``client``, showing redirects instead of following them (the dashboard answers forms with 303).
    static let withoutRedirects = HTTPClient(
        eventLoopGroupProvider: .singleton,
        configuration: .init(
            redirectConfiguration: .disallow, timeout: .init(connect: patience), connectionPool: .init(idleTimeout: .seconds(20))))

    func request(
        _ method: HTTPMethod, _ path: String, headers: [(String, String)] = [], body: Data? = nil,
        timeout: TimeAmount = Server.patience, followRedirects: Bool = true
    ) async throws -> Reply {
        var request = HTTPClientRequest(url: "http://127.0.0.1:\(port)\(path)")
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let client = followRedirects ? Self.client : Self.withoutRedirects
        return try await Waits.named("\(method) \(path) on port \(port)") {
            let response = try await client.execute(request, timeout: timeout)
            let bytes = try await response.body.collect(upTo: 16 << 20)
            return Reply(status: Int(response.status.code), headers: response.headers, body: Data(bytes.readableBytesView))
        }
    }

    /// A JSON request with a bearer token.
    func send(
        _ method: HTTPMethod, _ path: String, key: String?, json: JSONValue? = nil, headers: [(String, String)] = []
    ) async throws -> Reply {
        var all = headers
        if let key { all.append(("Authorization", "Bearer \(key)")) }
        if json != nil { all.append(("Content-Type", "application/json")) }
        return try await request(method, path, headers: all, body: try json?.data())
    }

    /// The value of a metric of `/metrics` (its whole name, labels included), nil when it is not there.
    func metric(_ name: String) async throws -> Double? {
        let text = String(decoding: try await request(.GET, "/metrics").body, as: UTF8.self)
        return text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    func postEvents(_ events: [[String: String]], key: String?, timeout: TimeAmount = Server.patience) async throws -> Reply {
        let body = try JSONSerialization.data(withJSONObject: ["events": events])
        return try await postEvents(body: body, key: key, timeout: timeout)
    }

    func postEvents(
        body: Data, key: String?, extraHeaders: [(String, String)] = [], timeout: TimeAmount = Server.patience
    ) async throws -> Reply {
        var headers = [("Content-Type", "application/json")] + extraHeaders
        if let key { headers.append(("Authorization", "Bearer \(key)")) }
        return try await request(.POST, "/v1/events", headers: headers, body: body, timeout: timeout)
    }
}

/// A client event as an app would post it.
func clientEvent(
    id: UUID = UUID(), type: String = "launched", occurredAt: Date, install: UUID = UUID(), version: String = "1.8.0",
    extra: [String: String] = [:]
) -> [String: String] {
    var event: [String: String] = [
        "id": id.uuidString.lowercased(), "type": type, "occurredAt": Timestamp.format(occurredAt),
        "installId": install.uuidString.lowercased(), "platform": "ios", "appVersion": version, "osVersion": "17.4",
        "locale": "en",
    ]
    for (key, value) in extra { event[key] = value }
    return event
}

/// Writes one event straight into the log on `connection` (inside its transaction, if one is open),
/// bypassing ingestion: for logs whose feed order a test arranges.
func insertEvent(
    on connection: PostgresConnection, app: AppID, install: UUID, at date: Date, recordedAt: Date? = nil, version: String,
    type: String = "launched", data: String = "{}"
) async throws {
    try await connection.query(
        """
        INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
        VALUES (\(UUID()), \(date), \(recordedAt ?? date), \(app), \(type), \(install), 'ios', \(version), \(data)::jsonb)
        """, logger: TestEnvironment.logger)
}
