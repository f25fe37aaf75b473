import UpshiftStore

/// The application's database pools (docs/OPERATIONS.md, "Database connections"): how wide each is,
/// and how long a request waits for a connection and then for an answer. One instance with both
/// roles opens up to `hot + reads + projections` connections, plus one for the catalog listener
/// (``connections(roles:)``).
public struct DatabasePoolSettings: Sendable {
    /// Ingestion's writer, the check's observations, key and session look-ups, the catalog snapshot.
    public var hotConnections = 8
    /// Reports, dashboard pages and the admin API.
    public var readConnections = 6
    /// The projection runner: one connection per generation it leads (it holds its lock), and its
    /// bookkeeping. At least ``minimumProjectionConnections``.
    public var projectionConnections = Self.minimumProjectionConnections
    /// How long a request waits for a connection of its pool before it is answered `503`.
    public var waitTimeout: Duration = .seconds(2)
    /// How long a request waits for the database's answer (a report: ``reportStatementTimeout`` and a
    /// second more), before its connection is closed and it is answered `503`.
    public var answerTimeout: Duration = .seconds(5)
    /// `statement_timeout` of the reads pool's connections: PostgreSQL cancels a report, dashboard or
    /// admin statement that runs longer (`503`). Every report reads a few rows of the read models kept
    /// for it (milliseconds at a million installs, docs/BENCHMARKS.md), so 5 s leaves a wide margin.
    public var reportStatementTimeout: Duration = .seconds(5)

    public init() {}

    /// Every projection may have two generations at once (the active one and a rebuild), and each
    /// leader holds a connection for as long as it leads and asks for a second now and then (the log's
    /// length, a switch-over); with two more for the supervisor and those, no leader waits on another.
    /// Fewer could leave every connection held by leaders waiting for one more: the runner would stall.
    public static let minimumProjectionConnections = 2 * Projections.all.count + 2

    var hotBounds: DatabasePool.Bounds { .init(wait: waitTimeout, answer: answerTimeout) }
    var readBounds: DatabasePool.Bounds { .init(wait: waitTimeout, answer: reportStatementTimeout + .seconds(1)) }

    /// The connections one instance with `roles` opens at most: the hot pool always (migrations and
    /// partitions need it), the reads pool and the catalog listener with `http`, the runner's pool
    /// with `projections`.
    public func connections(roles: Set<ServerRole>) -> Int {
        hotConnections + (roles.contains(.http) ? readConnections + 1 : 0)
            + (roles.contains(.projections) ? projectionConnections : 0)
    }
}
