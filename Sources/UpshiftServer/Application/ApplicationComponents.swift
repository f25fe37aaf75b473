import Foundation
import Logging
import Prometheus
import UpshiftCore
import UpshiftStore

/// The shared parts of one application, made once from its configuration: the logger, the metrics
/// registry, the database pools and stores, the catalog snapshot and the services that routes use.
/// ``buildRouter(_:)``, ``serviceList(_:)`` and ``startUp(_:)`` assemble the application from them.
struct ApplicationComponents {
    let configuration: AppConfiguration
    let logger: Logger
    /// The bound on a graceful shutdown, shared by the connections and the ingestion writer.
    let shutdown: ShutdownDeadline
    let migrations: [Migration]
    /// Prometheus, bound here once: every service counts through the swift-metrics API, into a registry of
    /// this application's own (tests build several applications in one process).
    let registry: PrometheusCollectorRegistry
    let metrics: PrometheusMetricsFactory
    /// Pools of their own for the hot path, the reads and the projection runner, so that slow reports
    /// cannot starve ingestion (docs/OPERATIONS.md, "Database connections"); the report queries on a
    /// streaming replica when one is configured.
    let hot: DatabasePool
    let reads: DatabasePool
    let replica: DatabasePool?
    /// With the `projections` role only.
    let projections: DatabasePool?
    let eventLog: EventLog
    let catalogStore: CatalogStore
    let snapshot: CatalogSnapshot
    let readiness: Readiness
    let snapshotLoader: CatalogSnapshotService
    let partitions: PartitionMaintainer
    let keys: KeyDirectory
    let feedSignal: FeedSignal
    /// The instance's limits on report reads and backtests, shared by the API, the dashboard and the rules.
    let readers: ReaderShares
    /// With the `http` role only: the group-commit writer of events and check observations.
    let writer: IngestionWriter?

    init(_ configuration: AppConfiguration, logger baseLogger: Logger?) throws {
        self.configuration = configuration
        var logger = baseLogger ?? Logger(label: "upshift")
        logger.logLevel = configuration.logLevel
        self.logger = logger
        shutdown = ShutdownDeadline(
            timeout: configuration.connections.shutdownTimeout, flushTimeout: configuration.ingestion.flushTimeout)
        migrations = try configuration.migrationsDirectory.map(Migration.load(fromConfigured:)) ?? Migration.embedded()
        registry = PrometheusCollectorRegistry()
        var metrics = PrometheusMetricsFactory(registry: registry)
        metrics.durationHistogramBuckets["upshift_http_request_duration_seconds"] = RequestMetricsMiddleware<
            UpshiftRequestContext
        >.durationBuckets
        metrics.valueHistogramBuckets["upshift_ingest_batch_events"] = [1, 2, 5, 10, 25, 50, 100, 250, 500]
        metrics.valueHistogramBuckets["upshift_ingest_flush_events"] = [1, 10, 100, 500, 1_000, 2_500, 5_000]
        self.metrics = metrics

        let pools = configuration.pools
        // The hot pool's statements end in PostgreSQL too when their caller stops waiting: one left waiting
        // for a lock would hold its connection's session (and its transaction id) long after its `503`.
        hot = DatabasePool(
            name: "hot", settings: configuration.database, connections: pools.hotConnections, bounds: pools.hotBounds,
            statementTimeout: pools.answerTimeout, metrics: metrics, logger: logger)
        reads = DatabasePool(
            name: "reads", settings: configuration.database, connections: pools.readConnections,
            bounds: pools.readBounds, statementTimeout: pools.reportStatementTimeout, metrics: metrics, logger: logger)
        // A replica's pool is bounded like the reads pool, so that an unreachable replica fails reports alone (`503`).
        let serveHTTP = configuration.roles.contains(.http)
        replica = configuration.reportsDatabase.flatMap { replica in
            guard serveHTTP else { return nil }
            return DatabasePool(
                name: "reports", settings: replica, connections: pools.readConnections, bounds: pools.readBounds,
                statementTimeout: pools.reportStatementTimeout, metrics: metrics, logger: logger)
        }
        projections =
            configuration.roles.contains(.projections)
            ? DatabasePool(
                name: "projections", settings: configuration.database, connections: pools.projectionConnections,
                bounds: nil, metrics: metrics, logger: logger)
            : nil
        eventLog = EventLog(pool: hot, logger: logger)
        catalogStore = CatalogStore(pool: reads, logger: logger)
        snapshot = CatalogSnapshot()
        readiness = Readiness(required: serveHTTP ? [.migrations, .partitions, .catalog, .keys] : [.migrations, .partitions])
        snapshotLoader = CatalogSnapshotService(
            snapshot: snapshot, store: CatalogStore(pool: hot, logger: logger), database: configuration.database,
            readiness: readiness, metrics: metrics, logger: logger)
        partitions = PartitionMaintainer(log: eventLog, clock: configuration.clock, logger: logger)
        keys = KeyDirectory(
            store: KeyStore(pool: hot, logger: logger), refreshInterval: configuration.keyRefresh,
            readiness: readiness, logger: logger)
        let feedSignal = FeedSignal()
        self.feedSignal = feedSignal
        readers = ReaderShares(configuration.readers, metrics: metrics)
        writer =
            serveHTTP
            ? IngestionWriter(
                log: eventLog, clock: configuration.clock, settings: configuration.ingestion, metrics: metrics,
                shutdown: shutdown, logger: logger, wake: { feedSignal.signal() })
            : nil
    }
}
