import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import ServiceLifecycle
import Synchronization
import UnixSignals
import UpshiftCore
import UpshiftStore

/// The composition root: builds the whole application from one configuration value (clock included).
/// `upshift serve`, the tests and the simulator all build it here.
public func buildApplication(_ configuration: AppConfiguration, logger baseLogger: Logger? = nil) async throws
    -> some ApplicationProtocol
{
    let parts = try ApplicationParts(configuration, logger: baseLogger)
    let limits = configuration.connections
    var app = Application(
        router: parts.router,
        server: HTTPServerBuilder { [shutdown = parts.shutdown] responder in
            GuardedHTTP1Channel(responder: responder, limits: limits, shutdown: shutdown)
        },
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "upshift", backlog: 1024,
            availableConnectionsDelegate: MaximumAvailableConnections(limits.maximumConnections, logger: parts.logger)),
        services: parts.services,
        logger: parts.logger)
    app.beforeServerStarts(perform: parts.start)
    return app
}

/// Runs `app` (built by ``buildApplication(_:logger:)`` from `configuration`) until SIGTERM or SIGINT,
/// then shuts it down within `configuration.connections.shutdownTimeout`: the server and the
/// ingestion writer bound their own work by it (``ShutdownDeadline``), and whatever else still runs
/// when it is spent is cancelled, so that the process exits 0 in time even when the database hangs.
public func runUntilTerminated(_ app: some ApplicationProtocol, configuration: AppConfiguration) async throws {
    var group = ServiceGroupConfiguration(
        services: [.init(service: app)], gracefulShutdownSignals: [.sigterm, .sigint], logger: app.logger)
    group.maximumGracefulShutdownDuration = configuration.connections.shutdownTimeout
    do {
        try await ServiceGroup(configuration: group).run()
    } catch let error where error is SocketAddressError || error is SocketAddressError.UnknownHost {
        // The host name does not resolve: say which setting holds it.
        throw ConfigurationError(
            description: "UPSHIFT_HOST (or --host) \(configuration.host) cannot be listened on: \(error)")
    } catch let error as IOError where error.description.contains("bind") {
        throw ConfigurationError(
            description: "cannot listen on UPSHIFT_HOST \(configuration.host), UPSHIFT_PORT \(configuration.port) "
                + "(or --host, --port): \(error)")
    }
}

/// What the application is made of: the router with every route, the services of its group in
/// dependency order, and the work that must succeed before the port opens.
public struct ApplicationParts {
    public let router: Router<UpshiftRequestContext>
    /// What the router answers: method and path.
    public let routes: [(method: HTTPRequest.Method, path: String)]
    let services: [any Service]
    let start: @Sendable () async throws -> Void
    let logger: Logger
    /// The bound on a graceful shutdown, shared by the connections and the ingestion writer.
    let shutdown: ShutdownDeadline

    public init(_ configuration: AppConfiguration, logger baseLogger: Logger? = nil) throws {
        let logger = {
            var logger = baseLogger ?? Logger(label: "upshift")
            logger.logLevel = configuration.logLevel
            return logger
        }()
        self.logger = logger
        let shutdown = ShutdownDeadline(
            timeout: configuration.connections.shutdownTimeout, flushTimeout: configuration.ingestion.flushTimeout)
        self.shutdown = shutdown

        let migrations = try configuration.migrationsDirectory.map(Migration.load(fromConfigured:)) ?? Migration.embedded()

        let database = Database(
            settings: configuration.database, maximumConnections: configuration.maximumConnections, logger: logger)
        let client = database.client
        let eventLog = EventLog(client: client, logger: logger)
        let catalogStore = CatalogStore(client: client, logger: logger)
        let snapshot = CatalogSnapshot()
        let serveHTTP = configuration.roles.contains(.http)
        let readiness = Readiness(
            required: serveHTTP ? ["migrations", "partitions", "catalog", "keys"] : ["migrations", "partitions"])
        let snapshotLoader = CatalogSnapshotService(
            snapshot: snapshot, store: catalogStore, readiness: readiness, metrics: configuration.metrics, logger: logger)
        let partitions = PartitionMaintainer(log: eventLog, clock: configuration.clock, logger: logger)
        let authenticator = KeyAuthenticator(
            store: KeyStore(client: client, logger: logger), refreshInterval: configuration.keyRefresh,
            readiness: readiness, logger: logger)

        let router = Router(context: UpshiftRequestContext.self)
        let routeTable = RouteTable()
        router.middlewares.add(ProblemMiddleware(routes: routeTable))
        if configuration.logLevel <= .debug { router.middlewares.add(LogRequestsMiddleware(.debug)) }
        HealthController(
            readiness: readiness, database: database, metrics: configuration.metrics,
            openAPI: try OpenAPIDocument.load(configuration.openAPIFile)
        ).addRoutes(to: router)

        var services: [any Service] = [DatabaseService(database: database)]
        let feedSignal = FeedSignal()
        if serveHTTP {
            let writer = IngestionWriter(
                log: eventLog, clock: configuration.clock, settings: configuration.ingestion,
                metrics: configuration.metrics, shutdown: shutdown, logger: logger, wake: { feedSignal.signal() })
            EventsController(
                writer: writer, authenticator: authenticator, clock: configuration.clock,
                settings: configuration.ingestion, trustedProxies: configuration.trustedProxies,
                metrics: configuration.metrics
            ).addRoutes(to: router)
            CheckController(
                snapshot: snapshot, writer: writer, clock: configuration.clock, settings: configuration.check,
                trustedProxies: configuration.trustedProxies, metrics: configuration.metrics, logger: logger
            ).addRoutes(to: router)
            CatalogController(store: catalogStore, authenticator: authenticator, clock: configuration.clock) {
                await snapshotLoader.reload(reason: "write")
            }.addRoutes(to: router)
            let reports = ReportService(
                store: ReportStore(client: client, logger: logger), snapshot: snapshot, clock: configuration.clock)
            ReportsController(
                reports: reports, authenticator: authenticator, snapshot: snapshot, clock: configuration.clock
            ).addRoutes(to: router)
            DashboardController(
                sessions: SessionStore(client: client, logger: logger), authenticator: authenticator,
                catalog: catalogStore, reports: reports, snapshot: snapshot, clock: configuration.clock,
                signInLimiter: RateLimiter(configuration.check.ratePerClient),
                trustedProxies: configuration.trustedProxies
            ) {
                await snapshotLoader.reload(reason: "dashboard write")
            }.addRoutes(to: router)
            services.append(contentsOf: [partitions, writer, snapshotLoader, authenticator] as [any Service])
        }
        if configuration.roles.contains(.projections) {
            services.append(
                ProjectionRunner(
                    store: ProjectionStore(client: client, logger: logger), settings: configuration.projections,
                    signal: feedSignal, readiness: readiness, metrics: configuration.metrics, logger: logger))
        }
        routes = router.routes.map { ($0.method, $0.path.description) }
        routeTable.load(routes)
        self.router = router
        self.services = services

        start = {
            try await retryingWhileUnreachable(logger: logger) {
                let applied = try await Migrator(client: client, logger: logger).migrate(migrations)
                if !applied.isEmpty { logger.info("migrated", metadata: ["migrations.applied": "\(applied)"]) }
            }
            readiness.mark("migrations")
            try await retryingWhileUnreachable(logger: logger) { try await partitions.ensure() }
            readiness.mark("partitions")
            if serveHTTP {
                try await retryingWhileUnreachable(logger: logger) { try await snapshotLoader.load() }
                try await retryingWhileUnreachable(logger: logger) { try await authenticator.load() }
            }
        }
    }
}

/// The paths the router answers and their methods, so that a method a path does not answer (any
/// method, `QUERY` included) is `405` with `Allow` (RFC 9110 §15.5.6) rather than `404`.
final class RouteTable: Sendable {
    private let routes = Mutex<[(segments: [Substring], methods: [HTTPRequest.Method])]>([])

    func load(_ described: [(method: HTTPRequest.Method, path: String)]) {
        var byPath: [String: [HTTPRequest.Method]] = [:]
        for route in described { byPath[route.path, default: []].append(route.method) }
        routes.withLock { routes in
            routes = byPath.map { path, methods in (path.split(separator: "/"), methods) }
        }
    }

    /// The methods of the route `path` matches (a `{name}` or `:name` segment matches any one segment).
    func methods(of path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/")
        return routes.withLock { routes in
            routes.first { route in
                route.segments.count == segments.count
                    && zip(route.segments, segments).allSatisfy { $0.0.hasPrefix(":") || $0.0.hasPrefix("{") || $0.0 == $0.1 }
            }?.methods
        }
    }
}

/// Start-up work that needs the database waits for it (a container may start before PostgreSQL),
/// but gives up after a minute so that a misconfigured instance fails visibly.
private func retryingWhileUnreachable(logger: Logger, _ work: @Sendable () async throws -> Void) async throws {
    let deadline = ContinuousClock.now.advanced(by: .seconds(60))
    while true {
        do {
            return try await work()
        } catch where Database.isConnectionError(error) && ContinuousClock.now < deadline {
            logger.warning("database unreachable at start; retrying", metadata: ["error": "\(error)"])
            try await Task.sleep(for: .seconds(1))
        }
    }
}

/// The connection pool as a service of the group: started first, stopped last.
struct DatabaseService: Service {
    let database: Database

    func run() async {
        await database.run()
    }
}
