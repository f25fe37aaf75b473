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
        let components = try ApplicationComponents(configuration, logger: baseLogger)
        (router, routes) = try buildRouter(components)
        services = serviceList(components)
        start = startUp(components)
        logger = components.logger
        shutdown = components.shutdown
    }
}

/// Every route of the application, behind its middleware, and what it answers (method and path).
func buildRouter(
    _ parts: ApplicationComponents
) throws -> (Router<UpshiftRequestContext>, [(method: HTTPRequest.Method, path: String)]) {
    let configuration = parts.configuration
    let router = Router(context: UpshiftRequestContext.self)
    let routeTable = RouteTable()
    router.middlewares.add(RequestMetricsMiddleware(factory: parts.metrics))
    router.middlewares.add(ProblemMiddleware(routes: routeTable))
    router.middlewares.add(
        BodyBudgetMiddleware(budget: BodyBudget(capacity: configuration.connections.bodyBudgetBytes, metrics: parts.metrics)))
    if configuration.logLevel <= .debug { router.middlewares.add(LogRequestsMiddleware(.debug)) }
    router.addRoutes(
        HealthController(
            readiness: parts.readiness, database: DatabaseProbe(pool: parts.hot),
            exposition: { [registry = parts.registry] in registry.emit(into: &$0) },
            openAPI: try OpenAPIDocument.load(configuration.openAPIFile), operatorToken: configuration.operatorToken
        ).routes)
    if let writer = parts.writer {
        let authentication = BearerAuthentication(keys: parts.keys)
        let readers = parts.readers
        let reload = parts.snapshotLoader.reload(reason:)
        let ruleRecords = RuleRecordStore(pool: parts.reads, logger: parts.logger)
        router.addRoutes(
            EventsController(
                writer: writer, clock: configuration.clock, settings: configuration.ingestion,
                trustedProxies: configuration.trustedProxies, metrics: parts.metrics
            ).routes(authentication: authentication), atPath: "/v1/events")
        router.addRoutes(
            CheckController(
                snapshot: parts.snapshot, writer: writer, clock: configuration.clock, settings: configuration.check,
                trustedProxies: configuration.trustedProxies, metrics: parts.metrics, logger: parts.logger
            ).routes, atPath: "/v1/apps/:app")
        router.addRoutes(
            CatalogController(
                store: parts.catalogStore, records: ruleRecords,
                clock: configuration.clock
            ) { await reload("write") }
                .routes(authentication: authentication, readers: readers), atPath: "/v1/apps")
        let reportStore = ReportStore(pool: parts.replica ?? parts.reads, logger: parts.logger)
        let reports = ReportService(store: reportStore, snapshot: parts.snapshot, clock: configuration.clock, readers: readers)
        let reportsController = ReportsController(reports: reports, snapshot: parts.snapshot, clock: configuration.clock)
        router.addRoutes(reportsController.routes(authentication: authentication), atPath: "/v1/apps/:app/reports")
        router.addRoutes(reportsController.backtestRoutes(authentication: authentication), atPath: "/v1/apps/:app")
        router.addRoutes(
            EventExportController(
                exporter: EventExporter(pool: parts.reads, logger: parts.logger, scanLimit: EventExportController.scanLimit),
                retention: LogRetention(pool: parts.reads, logger: parts.logger),
                snapshot: parts.snapshot, readers: readers
            ).routes(authentication: authentication), atPath: "/v1/apps/:app")
        router.addRoutes(
            ErasureController(
                store: ErasureStore(pool: parts.reads, logger: parts.logger), snapshot: parts.snapshot, clock: configuration.clock
            ).routes(authentication: authentication), atPath: "/v1/apps/:app")
        router.addRoutes(
            WebhookController(
                store: WebhookStore(pool: parts.reads, logger: parts.logger), snapshot: parts.snapshot,
                settings: configuration.webhooks, clock: configuration.clock
            ).routes(authentication: authentication), atPath: "/v1/apps/:app")
        router.addRoutes(
            DashboardPages(
                sessions: SessionStore(pool: parts.hot, logger: parts.logger), keys: parts.keys, catalog: parts.catalogStore,
                reports: reports, snapshot: parts.snapshot, clock: configuration.clock,
                signInLimiter: RateLimiter(configuration.check.ratePerClient, name: "sign_in", metrics: parts.metrics),
                sessionLimiter: RateLimiter(configuration.dashboard.ratePerClient, name: "dashboard", metrics: parts.metrics),
                trustedProxies: configuration.trustedProxies, ruleRecords: ruleRecords,
                ruleEvaluator: RuleEvaluator(
                    parts, reports: reportStore, records: ruleRecords, projections: parts.reads, backtests: reports),
                webhookStore: WebhookStore(pool: parts.reads, logger: parts.logger), webhookSettings: configuration.webhooks
            ) { await reload("dashboard write") }.routes, atPath: "/dashboard")
        // The address a person types: the dashboard.
        router.get("/") { _, _ in DashboardPages.redirect("/dashboard") }
    }
    let routes = router.routes.map { ($0.method, $0.path.description) }
    routeTable.load(routes)
    return (router, routes)
}

/// The services of the application's group, in dependency order: the pools first, so that they stop
/// last, after everything that uses them.
func serviceList(_ parts: ApplicationComponents) -> [any Service] {
    let configuration = parts.configuration
    var services: [any Service] = [parts.projections?.client, parts.hot.client, parts.reads.client, parts.replica?.client]
        .compactMap { $0 }
    let serveHTTP = parts.writer != nil
    if let writer = parts.writer {
        services.append(contentsOf: [parts.partitions, writer, parts.snapshotLoader, parts.keys] as [any Service])
    }
    let snapshot = parts.snapshot
    let snapshotLoader = parts.snapshotLoader
    let catalogStore = parts.catalogStore
    if let sync = configuration.storeSync {
        // One instance at a time asks the store (an advisory lock), whatever its roles.
        services.append(
            AppStoreSync(
                settings: sync,
                importer: AppStoreImporter(
                    settings: sync.importer, catalog: catalogStore, clock: configuration.clock, logger: parts.logger),
                catalog: catalogStore, database: configuration.database, clock: configuration.clock,
                metrics: parts.metrics, logger: parts.logger,
                catalogVersion: { @Sendable in
                    serveHTTP ? snapshot.version : ((try? await catalogStore.version()) ?? -1)
                }
            ) {
                if serveHTTP { await snapshotLoader.reload(reason: "store sync") }
            })
    }
    if let projections = parts.projections {
        services.append(
            ProjectionRunner(
                store: ProjectionStore(pool: projections, logger: parts.logger), settings: configuration.projections,
                signal: parts.feedSignal, readiness: parts.readiness, metrics: parts.metrics, logger: parts.logger))
        // Rollout schedules advance where the projections run, one instance at a time (an advisory lock).
        // The rules read the primary (their lag is measured there) and backtest under the instance's limit.
        let catalog = CatalogStore(pool: projections, logger: parts.logger)
        let reportStore = ReportStore(pool: projections, logger: parts.logger)
        let backtests = ReportService(store: reportStore, snapshot: snapshot, clock: configuration.clock, readers: parts.readers)
        var scheduler = RolloutScheduler(
            catalog: catalog, database: configuration.database,
            clock: configuration.clock, readiness: parts.readiness, metrics: parts.metrics, logger: parts.logger
        ) {
            if serveHTTP { await snapshotLoader.reload(reason: "rollout schedule") }
        }
        // Rules tell webhooks of their health regressions; webhooks are delivered where the rollout worker runs.
        let webhooks = WebhookStore(pool: projections, logger: parts.logger)
        var rules = RuleEvaluator(
            parts, reports: reportStore, records: RuleRecordStore(pool: projections, logger: parts.logger),
            projections: projections, backtests: backtests, catalog: catalog)
        rules.webhooks = webhooks
        scheduler.rules = rules
        scheduler.rulesInterval = configuration.projections.rulesInterval
        services.append(scheduler)
        // Erasure waits for the projections too, and runs where they do, one instance at a time.
        services.append(
            ErasureWorker(
                store: ErasureStore(pool: projections, logger: parts.logger), settings: configuration.projections,
                database: configuration.database, readiness: parts.readiness, archives: configuration.exportDirectory ?? configuration.retention?.directory,
                clock: configuration.clock,
                metrics: parts.metrics, logger: parts.logger))
        // Webhooks: one instance at a time delivers them.
        var webhookWorker = WebhookWorker(
            store: webhooks, settings: configuration.webhooks, database: configuration.database, readiness: parts.readiness,
            clock: configuration.clock, metrics: parts.metrics, logger: parts.logger)
        webhookWorker.crossings = AdoptionCrossings(
            webhooks: webhooks, catalog: catalog, reports: reportStore,
            projections: ProjectionStore(pool: projections, logger: parts.logger), logger: parts.logger)
        services.append(webhookWorker)
        // Retention waits for the projections, so it runs where they do, one instance at a time.
        if let retention = configuration.retention {
            services.append(
                LogRetentionWorker(
                    settings: retention, retention: LogRetention(pool: projections, logger: parts.logger),
                    exporter: EventExporter(pool: projections, logger: parts.logger), database: configuration.database,
                    clock: configuration.clock, metrics: parts.metrics, logger: parts.logger))
        }
    }
    return services
}

/// What must succeed before the port opens: the database answers, the migrations are applied, this
/// month's partitions exist, and (with the `http` role) the catalog and the keys are loaded.
func startUp(_ parts: ApplicationComponents) -> @Sendable () async throws -> Void {
    let database = parts.configuration.database
    let reportsDatabase = parts.replica == nil ? nil : parts.configuration.reportsDatabase
    let (logger, migrations, hot, readiness) = (parts.logger, parts.migrations, parts.hot, parts.readiness)
    let (partitions, snapshotLoader, keys, serveHTTP) = (parts.partitions, parts.snapshotLoader, parts.keys, parts.writer != nil)
    return {
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

extension RuleEvaluator {
    /// The evaluator of the application's parts: the read models through `reports`, lag and rebuilds through
    /// `projections`' registry, backtests through `backtests` (under the instance's limit, counted against
    /// no token).
    init(
        _ parts: ApplicationComponents, reports: ReportStore, records: RuleRecordStore, projections: DatabasePool,
        backtests: ReportService, catalog: CatalogStore? = nil
    ) {
        self.init(
            catalog: catalog ?? parts.catalogStore, reports: reports,
            projections: ProjectionStore(pool: projections, logger: parts.logger), records: records,
            backtest: { app, platform, current, proposed, now in
                try await backtests.backtest(
                    app: app, platform: platform, windowDays: BacktestReport.defaultWindowDays, now: now, current: current,
                    proposed: proposed)
            }, clock: parts.configuration.clock, metrics: parts.metrics, logger: parts.logger)
    }
}
