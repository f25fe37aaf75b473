import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// The composition root: builds the whole application from one configuration value (clock included).
/// `upshift serve`, the tests and the simulator all build it here.
public func buildApplication(_ configuration: AppConfiguration, logger baseLogger: Logger? = nil) async throws
    -> some ApplicationProtocol
{
    let logger = {
        var logger = baseLogger ?? Logger(label: "upshift")
        logger.logLevel = configuration.logLevel
        return logger
    }()

    guard let migrationsDirectory = configuration.migrationsDirectory else { throw MigrationError.directoryNotFound }
    let migrations = try Migration.load(from: migrationsDirectory)

    let database = Database(
        settings: configuration.database, maximumConnections: configuration.maximumConnections, logger: logger)
    let client = database.client
    let eventLog = EventLog(client: client, logger: logger)
    let keys = KeyStore(client: client, logger: logger)
    let catalogStore = CatalogStore(client: client, logger: logger)
    let snapshot = CatalogSnapshot()
    let serveHTTP = configuration.roles.contains(.http)
    let readiness = Readiness(required: serveHTTP ? ["migrations", "partitions", "catalog"] : ["migrations", "partitions"])
    let snapshotLoader = CatalogSnapshotService(snapshot: snapshot, store: catalogStore, readiness: readiness, logger: logger)
    let partitions = PartitionMaintainer(log: eventLog, clock: configuration.clock, logger: logger)

    let router = Router(context: UpshiftRequestContext.self)
    router.middlewares.add(ProblemMiddleware())
    if configuration.logLevel <= .debug { router.middlewares.add(LogRequestsMiddleware(.debug)) }
    HealthController(
        readiness: readiness, database: database, metrics: configuration.metrics
    ).addRoutes(to: router)

    var services: [any Service] = [DatabaseService(database: database)]
    let feedSignal = FeedSignal()
    if serveHTTP {
        let writer = IngestionWriter(
            log: eventLog, clock: configuration.clock, settings: configuration.ingestion,
            metrics: configuration.metrics, logger: logger, wake: { feedSignal.signal() })
        let authenticator = KeyAuthenticator(keys: keys, cacheSeconds: configuration.keyCacheSeconds)
        EventsController(
            writer: writer, authenticator: authenticator, clock: configuration.clock, metrics: configuration.metrics
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
            sessions: SessionStore(client: client, logger: logger), keys: keys, catalog: catalogStore, reports: reports,
            snapshot: snapshot, clock: configuration.clock
        ) {
            await snapshotLoader.reload(reason: "dashboard write")
        }.addRoutes(to: router)
        services.append(contentsOf: [partitions, writer, snapshotLoader] as [any Service])
    }
    if configuration.roles.contains(.projections) {
        services.append(
            ProjectionRunner(
                store: ProjectionStore(client: client, logger: logger), settings: configuration.projections,
                signal: feedSignal, readiness: readiness, metrics: configuration.metrics, logger: logger))
    }

    var app = Application(
        router: router,
        configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "upshift"),
        services: services,
        logger: logger)
    app.beforeServerStarts {
        try await retryingWhileUnreachable(logger: logger) {
            let applied = try await Migrator(client: client, logger: logger).migrate(migrations)
            if !applied.isEmpty { logger.info("migrated", metadata: ["migrations.applied": "\(applied)"]) }
        }
        readiness.mark("migrations")
        try await retryingWhileUnreachable(logger: logger) { try await partitions.ensure() }
        readiness.mark("partitions")
        if serveHTTP {
            try await retryingWhileUnreachable(logger: logger) { try await snapshotLoader.load() }
        }
    }
    return app
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
