import Foundation
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import Prometheus
import ServiceLifecycle
import UnixSignals
import UpshiftCore
import UpshiftStore

/// The composition root: builds the whole application from one configuration value (clock included).
/// `upshift serve`, the tests and the simulator all build it here. `onServerRunning` is called once the
/// port is open (with port 0, it tells which one).
public func buildApplication(
    _ configuration: AppConfiguration, logger baseLogger: Logger? = nil,
    onServerRunning: @escaping @Sendable (any NIOCore.Channel) async -> Void = { _ in }
) async throws -> some ApplicationProtocol {
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
        onServerRunning: onServerRunning,
        logger: parts.logger)
    app.beforeServerStarts(perform: parts.start)
    return app
}

/// Runs `app` (built by ``buildApplication(_:logger:onServerRunning:)`` from `configuration`) until SIGTERM or SIGINT,
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
        // Prometheus is bound here, once: every service counts through the swift-metrics API, into a
        // registry of this application's own (tests build several applications in one process).
        let registry = PrometheusCollectorRegistry()
        var metrics = PrometheusMetricsFactory(registry: registry)
        metrics.durationHistogramBuckets["upshift_http_request_duration_seconds"] = RequestMetricsMiddleware<
            UpshiftRequestContext
        >.durationBuckets
        metrics.valueHistogramBuckets["upshift_ingest_batch_events"] = [1, 2, 5, 10, 25, 50, 100, 250, 500]
        metrics.valueHistogramBuckets["upshift_ingest_flush_events"] = [1, 10, 100, 500, 1_000, 2_500, 5_000]

        // Pools of their own for the hot path, the reads and the projection runner, so that slow reports
        // cannot starve ingestion (docs/OPERATIONS.md, "Database connections").
        let pools = configuration.pools
        // The hot pool's statements end in PostgreSQL too when their caller stops waiting: one left waiting
        // for a lock would hold its connection's session (and its transaction id) long after its `503`.
        let hot = DatabasePool(
            name: "hot", settings: configuration.database, connections: pools.hotConnections, bounds: pools.hotBounds,
            statementTimeout: pools.answerTimeout, metrics: metrics, logger: logger)
        let reads = DatabasePool(
            name: "reads", settings: configuration.database, connections: pools.readConnections,
            bounds: pools.readBounds, statementTimeout: pools.reportStatementTimeout, metrics: metrics, logger: logger)
        // The report queries on a streaming replica when one is configured: a pool of its own, bounded
        // like the reads pool, so that an unreachable replica fails reports alone (`503`).
        let serveHTTP = configuration.roles.contains(.http)
        let replica: DatabasePool? = configuration.reportsDatabase.flatMap { replica in
            guard serveHTTP else { return nil }
            return DatabasePool(
                name: "reports", settings: replica, connections: pools.readConnections, bounds: pools.readBounds,
                statementTimeout: pools.reportStatementTimeout, metrics: metrics, logger: logger)
        }
        let eventLog = EventLog(pool: hot, logger: logger)
        let catalogStore = CatalogStore(pool: reads, logger: logger)
        let snapshot = CatalogSnapshot()
        let readiness = Readiness(required: serveHTTP ? [.migrations, .partitions, .catalog, .keys] : [.migrations, .partitions])
        let snapshotLoader = CatalogSnapshotService(
            snapshot: snapshot, store: CatalogStore(pool: hot, logger: logger), database: configuration.database,
            readiness: readiness, metrics: metrics, logger: logger)
        let partitions = PartitionMaintainer(log: eventLog, clock: configuration.clock, logger: logger)
        let keys = KeyDirectory(
            store: KeyStore(pool: hot, logger: logger), refreshInterval: configuration.keyRefresh,
            readiness: readiness, logger: logger)

        let router = Router(context: UpshiftRequestContext.self)
        let routeTable = RouteTable()
        router.middlewares.add(RequestMetricsMiddleware(factory: metrics))
        router.middlewares.add(ProblemMiddleware(routes: routeTable))
        router.middlewares.add(
            BodyBudgetMiddleware(budget: BodyBudget(capacity: configuration.connections.bodyBudgetBytes, metrics: metrics)))
        if configuration.logLevel <= .debug { router.middlewares.add(LogRequestsMiddleware(.debug)) }
        router.addRoutes(
            HealthController(
                readiness: readiness, database: DatabaseProbe(pool: hot), exposition: { registry.emit(into: &$0) },
                openAPI: try OpenAPIDocument.load(configuration.openAPIFile), operatorToken: configuration.operatorToken
            ).routes)

        // The pools first: they stop last, after everything that uses them.
        var services: [any Service] = [hot.client, reads.client]
        if let replica { services.append(replica.client) }
        let feedSignal = FeedSignal()
        if serveHTTP {
            let authentication = BearerAuthentication(keys: keys)
            let readers = ReaderShares(configuration.readers, metrics: metrics)
            let writer = IngestionWriter(
                log: eventLog, clock: configuration.clock, settings: configuration.ingestion, metrics: metrics,
                shutdown: shutdown, logger: logger, wake: { feedSignal.signal() })
            router.addRoutes(
                EventsController(
                    writer: writer, clock: configuration.clock, settings: configuration.ingestion,
                    trustedProxies: configuration.trustedProxies, metrics: metrics
                ).routes(authentication: authentication), atPath: "/v1/events")
            router.addRoutes(
                CheckController(
                    snapshot: snapshot, writer: writer, clock: configuration.clock, settings: configuration.check,
                    trustedProxies: configuration.trustedProxies, metrics: metrics, logger: logger
                ).routes, atPath: "/v1/apps/:app")
            router.addRoutes(
                CatalogController(store: catalogStore, clock: configuration.clock) {
                    await snapshotLoader.reload(reason: "write")
                }.routes(authentication: authentication, readers: readers), atPath: "/v1/apps")
            let reports = ReportService(
                store: ReportStore(pool: replica ?? reads, logger: logger), snapshot: snapshot, clock: configuration.clock,
                readers: readers)
            let reportsController = ReportsController(reports: reports, snapshot: snapshot, clock: configuration.clock)
            router.addRoutes(reportsController.routes(authentication: authentication), atPath: "/v1/apps/:app/reports")
            router.addRoutes(reportsController.backtestRoutes(authentication: authentication), atPath: "/v1/apps/:app")
            router.addRoutes(
                DashboardPages(
                    sessions: SessionStore(pool: hot, logger: logger), keys: keys, catalog: catalogStore,
                    reports: reports, snapshot: snapshot, clock: configuration.clock,
                    signInLimiter: RateLimiter(configuration.check.ratePerClient, name: "sign_in", metrics: metrics),
                    sessionLimiter: RateLimiter(configuration.dashboard.ratePerClient, name: "dashboard", metrics: metrics),
                    trustedProxies: configuration.trustedProxies
                ) {
                    await snapshotLoader.reload(reason: "dashboard write")
                }.routes, atPath: "/dashboard")
            services.append(contentsOf: [partitions, writer, snapshotLoader, keys] as [any Service])
        }
        if let sync = configuration.storeSync {
            // One instance at a time asks the store (an advisory lock), whatever its roles.
            services.append(
                AppStoreSync(
                    settings: sync,
                    importer: AppStoreImporter(
                        settings: sync.importer, catalog: catalogStore, clock: configuration.clock, logger: logger),
                    catalog: catalogStore, database: configuration.database, clock: configuration.clock,
                    metrics: metrics, logger: logger,
                    catalogVersion: { @Sendable [serveHTTP] in
                        serveHTTP ? snapshot.version : ((try? await catalogStore.version()) ?? -1)
                    }
                ) { [serveHTTP] in
                    if serveHTTP { await snapshotLoader.reload(reason: "store sync") }
                })
        }
        if configuration.roles.contains(.projections) {
            let projections = DatabasePool(
                name: "projections", settings: configuration.database, connections: pools.projectionConnections,
                bounds: nil, metrics: metrics, logger: logger)
            services.insert(projections.client, at: 0)
            services.append(
                ProjectionRunner(
                    store: ProjectionStore(pool: projections, logger: logger), settings: configuration.projections,
                    signal: feedSignal, readiness: readiness, metrics: metrics, logger: logger))
            // Rollout schedules advance where the projections run, one instance at a time (an advisory lock).
            services.append(
                RolloutScheduler(
                    catalog: CatalogStore(pool: projections, logger: logger), database: configuration.database,
                    clock: configuration.clock, readiness: readiness, metrics: metrics, logger: logger
                ) { [serveHTTP] in
                    if serveHTTP { await snapshotLoader.reload(reason: "rollout schedule") }
                })
        }
        routes = router.routes.map { ($0.method, $0.path.description) }
        routeTable.load(routes)
        self.router = router
        self.services = services

        let database = configuration.database
        let reportsDatabase = replica == nil ? nil : configuration.reportsDatabase
        start = {
            try await waitForDatabase(database, logger: logger)
            try await retryingWhileUnreachable(logger: logger) {
                let applied = try await Migrator(client: hot.client, logger: logger).migrate(migrations)
                if !applied.isEmpty { logger.info("migrated", metadata: ["migrations.applied": "\(applied)"]) }
            }
            readiness.mark(.migrations)
            try await retryingWhileUnreachable(logger: logger) { try await partitions.ensure() }
            readiness.mark(.partitions)
            if serveHTTP {
                try await retryingWhileUnreachable(logger: logger) { try await snapshotLoader.load() }
                try await retryingWhileUnreachable(logger: logger) { try await keys.load() }
                // Only the reports need the replica: one that cannot be reached is logged with its
                // cause, and the server starts without it.
                if let reportsDatabase, let unreachable = await Database.diagnose(reportsDatabase, logger: logger) {
                    logger.warning(
                        "reports database unreachable at start; reports answer 503 until it is reachable",
                        metadata: ["error": "\(unreachable)"])
                }
            }
        }
    }
}

/// How long `serve` waits at start for PostgreSQL to accept a connection (a container may start
/// before it) before it gives up, so that a misconfigured instance fails visibly.
let startupDatabaseWait: Duration = .seconds(60)

/// Waits until PostgreSQL accepts a connection, logging each failed attempt with its cause (refused,
/// timed out, authentication, unknown database); throws ``DatabaseUnreachable`` after
/// ``startupDatabaseWait``.
private func waitForDatabase(_ settings: DatabaseSettings, logger: Logger) async throws {
    let deadline = ContinuousClock.now.advanced(by: startupDatabaseWait)
    var attempt = 1
    while let unreachable = await Database.diagnose(settings, logger: logger) {
        guard ContinuousClock.now < deadline else { throw unreachable }
        logger.warning(
            "database unreachable at start; retrying every second for up to \(startupDatabaseWait)",
            metadata: ["attempt": "\(attempt)", "error": "\(unreachable)"])
        attempt += 1
        try await Task.sleep(for: .seconds(1))
    }
}

/// Start-up work after the database answered once: should it go away again meanwhile, the work is
/// retried every second for up to ``startupDatabaseWait``.
private func retryingWhileUnreachable(logger: Logger, _ work: @Sendable () async throws -> Void) async throws {
    let deadline = ContinuousClock.now.advanced(by: startupDatabaseWait)
    while true {
        do {
            return try await work()
        } catch where Database.isConnectionError(error) && ContinuousClock.now < deadline {
            logger.warning("database unreachable at start; retrying", metadata: ["error": "\(error)"])
            try await Task.sleep(for: .seconds(1))
        }
    }
}
