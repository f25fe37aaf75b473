import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// One generation of a projection: its tables and checkpoint (the `projections` registry).
public struct ProjectionGeneration: Sendable, Equatable {
    public enum State: String, Sendable {
        /// Filling its tables from the start of the log while the active generation serves.
        case building
        /// Serving reports and following the feed.
        case active
        case retired
    }

    public var name: String
    public var generation: Int
    public var version: Int
    public var state: State
    public var checkpoint: FeedPosition
    public var maxRecordedAt: Date?
    public var events: Int64
    public var updatedAt: Date
}

/// The projection registry and the work of a projection's single active runner (docs/ARCHITECTURE.md,
/// "One runner per projection").
public struct ProjectionStore: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    // MARK: Registry

    /// Active projections that have not applied every event of the log yet.
    public func activeBehind() async throws -> Int {
        var behind = 0
        for try await value in try await pool.query(
            """
            SELECT count(*)::int8 FROM projections p WHERE p.state = 'active' AND EXISTS (
                SELECT 1 FROM event_log e WHERE (e.tx_id, e.position) > (p.last_tx, p.last_pos))
            """, logger: logger
        ).decode(Int.self) { behind = value }
        return behind
    }

    public func generations() async throws -> [ProjectionGeneration] {
        try await pool.withConnection { [logger] connection in try await Self.generations(on: connection, logger: logger) }
    }

    /// Gives every projection an active generation (the first start creates its tables), and starts
    /// a rebuild for each whose active generation has an older version than the code's.
    public func prepare(_ definitions: [any ProjectionDefinition]) async throws {
        try await pool.transaction(logger: logger) { [logger] connection in
            try await Self.lockRegistry(connection, logger: logger)
            let existing = try await Self.generations(on: connection, logger: logger)
            for definition in definitions {
                let mine = existing.filter { $0.name == definition.name }
                guard let active = mine.first(where: { $0.state == .active }) else {
                    try await Self.create(definition, state: .active, existing: mine, on: connection, logger: logger)
                    continue
                }
                if active.version != definition.version, !mine.contains(where: { $0.state == .building }) {
                    try await Self.create(definition, state: .building, existing: mine, on: connection, logger: logger)
                    logger.notice(
                        "projection version changed; rebuilding",
                        metadata: ["projection": "\(definition.name)", "version": "\(definition.version)"])
                }
            }
        }
    }

    /// A new building generation of `definition` (or the one already building), rebuilt from the start.
    public func beginRebuild(_ definition: any ProjectionDefinition) async throws -> ProjectionGeneration {
        try await pool.transaction(logger: logger) { [logger] connection in
            try await Self.lockRegistry(connection, logger: logger)
            let mine = try await Self.generations(on: connection, logger: logger).filter { $0.name == definition.name }
            if let building = mine.first(where: { $0.state == .building }) { return building }
            return try await Self.create(definition, state: .building, existing: mine, on: connection, logger: logger)
        }
    }

    /// The generation read a shorter history than the one it would replace: retention had dropped months
    /// of the log when it was created (docs/OPERATIONS.md, "Retention"). It is switched in only once the
    /// operator accepts that (``acceptShorterHistory(_:)``).
    public struct ShorterHistory: Error, CustomStringConvertible {
        public let projection: String
        /// nil: refused before a generation was created.
        public let generation: Int?
        public let from: Date

        public init(projection: String, generation: Int?, from: Date) {
            self.projection = projection
            self.generation = generation
            self.from = from
        }

        public var description: String {
            """
            \(generation.map { "generation \($0)" } ?? "a new generation") of \(projection) would hold events from \
            \(Timestamp.format(from)) only (the log's earlier months were dropped by retention), less than the \
            generation it would replace: it is switched in with `upshift projections rebuild \(projection) \
            --accept-shorter-history`
            """
        }
    }

    /// The instant a generation of `definition` created now would hold events from, when that is later
    /// than the active generation's start: nil when it would read as much of the log.
    /// nil too when the new generation would take over the closed aggregates of the days it does not
    /// read (``ProjectionDefinition/carriedTables(fromVersion:)``).
    public func shorterHistory(_ definition: any ProjectionDefinition) async throws -> Date? {
        let rows = try await pool.query(
            """
            SELECT r.kept_from, a.version FROM log_retention r
            JOIN projections a ON a.name = \(definition.name) AND a.state = 'active'
            WHERE r.kept_from > coalesce(a.history_from, '-infinity')
            """, logger: logger)
        for try await (from, version) in rows.decode((Date, Int).self) {
            return definition.carriedTables(fromVersion: version) == nil ? from : nil
        }
        return nil
    }

    /// `generation` of `definition` as `b` and the active generation as `a`, when `b` read a shorter
    /// history than `a`: the FROM item of ``carryOver(_:into:)`` and ``activate(_:generation:)``.
    private static func shorterThanActive(_ definition: any ProjectionDefinition, _ generation: Int) -> SQL {
        """
        projections b
        JOIN projections a ON a.name = b.name AND a.state = 'active' AND a.generation <> b.generation
        WHERE b.name = \(definition.name) AND b.generation = \(generation)
          AND b.history_from > coalesce(a.history_from, '-infinity')
        """
    }

    /// Copies into `generation`, when it read a shorter history than the active generation, the closed
    /// aggregates of the days before the log it read, from the active one (docs/OPERATIONS.md, "Retention").
    /// One statement per app and table, each a short transaction of its own, and again from the start if
    /// cut off (a row copied before is left as it is). Returns the generation copied from; nil when
    /// nothing is to be carried or `definition` carries nothing over from that one.
    private func carryOver(_ definition: any ProjectionDefinition, into generation: Int) async throws -> Int? {
        var source: (generation: Int, version: Int, before: Date)?
        for try await row in try await pool.query(
            """
            SELECT a.generation, a.version, b.history_from FROM \(Self.shorterThanActive(definition, generation))
            """, logger: logger
        ).decode((Int, Int, Date).self) { source = row }
        guard let source, let tables = definition.carriedTables(fromVersion: source.version) else { return nil }
        var apps: [AppID] = []
        for try await app in try await pool.query("SELECT app_id FROM apps ORDER BY app_id", logger: logger).decode(AppID.self) {
            apps.append(app)
        }
        for table in tables {
            let columns = SQL.joined(table.columns.map { "\(SQLIdentifier($0))" }, separator: ", ")
            for app in apps {
                try await pool.query(
                    """
                    INSERT INTO \(ProjectionTables.name(table.table, generation: generation)) (\(columns))
                    SELECT \(columns) FROM \(ProjectionTables.name(table.table, generation: source.generation))
                    WHERE app_id = \(app) AND day < (\(source.before)::timestamptz AT TIME ZONE 'UTC')::date
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
        }
        logger.notice(
            "projection generation took over the days before its history",
            metadata: [
                "projection": "\(definition.name)", "generation": "\(generation)", "from": "\(source.generation)",
                "before": "\(Timestamp.format(source.before))",
            ])
        return source.generation
    }

    /// Lets the building generation of `definition` replace the active one although it read a shorter
    /// history (``ShorterHistory``); false when none is building.
    public func acceptShorterHistory(_ definition: any ProjectionDefinition) async throws -> Bool {
        let rows = try await pool.query(
            """
            UPDATE projections SET shorter_history_accepted = true, updated_at = now()
            WHERE name = \(definition.name) AND state = 'building' RETURNING generation
            """, logger: logger)
        var found = false
        for try await _ in rows.decode(Int.self) { found = true }
        return found
    }

    /// Switches `generation` in as the active one, then drops the tables of the one it replaces. When it
    /// read a shorter history than the active one, it first takes over the closed aggregates of the days
    /// it did not read (``carryOver(_:into:)``) and then counts events from where the active one did; a
    /// definition that carries nothing over throws ``ShorterHistory`` unless that was accepted.
    public func activate(_ definition: any ProjectionDefinition, generation: Int) async throws {
        let carriedFrom = try await carryOver(definition, into: generation)
        let retired: [Int] = try await pool.transaction(logger: logger) { [logger] connection in
            try await Self.lockRegistry(connection, logger: logger)
            var shorter: (from: Date, accepted: Bool, active: Int)?
            for try await row in try await connection.query(
                """
                SELECT b.history_from, b.shorter_history_accepted, a.generation FROM \(Self.shorterThanActive(definition, generation))
                """, logger: logger
            ).decode((Date, Bool, Int).self) { shorter = row }
            if let shorter {
                if shorter.active == carriedFrom {
                    try await connection.query(
                        """
                        UPDATE projections b SET history_from = a.history_from
                        FROM projections a
                        WHERE b.name = \(definition.name) AND b.generation = \(generation)
                          AND a.name = b.name AND a.generation = \(shorter.active)
                        """, logger: logger)
                } else if !shorter.accepted {
                    throw ShorterHistory(projection: definition.name, generation: generation, from: shorter.from)
                }
            }
            let rows = try await connection.query(
                """
                UPDATE projections SET state = 'retired', updated_at = now()
                WHERE name = \(definition.name) AND state = 'active' AND generation <> \(generation)
                RETURNING generation
                """, logger: logger)
            var retired: [Int] = []
            for try await old in rows.decode(Int.self) { retired.append(old) }
            try await connection.query(
                """
                UPDATE projections SET state = 'active', activated_at = now(), updated_at = now()
                WHERE name = \(definition.name) AND generation = \(generation)
                """, logger: logger)
            return retired
        }
        for old in retired { try await drop(definition, generation: old) }
    }

    /// Drops a generation's tables and forgets it.
    public func drop(_ definition: any ProjectionDefinition, generation: Int) async throws {
        try await pool.transaction(logger: logger) { [logger] connection in
            try await connection.query(
                "DELETE FROM projections WHERE name = \(definition.name) AND generation = \(generation)", logger: logger)
            try await connection.query(
                "DELETE FROM projection_dead_letters WHERE name = \(definition.name) AND generation = \(generation)",
                logger: logger)
            for table in definition.tables {
                try await connection.query(
                    "DROP TABLE IF EXISTS \(ProjectionTables.name(table, generation: generation))",
                    logger: logger)
            }
        }
    }

    /// Dead letters per (projection, generation).
    public func deadLetterCounts() async throws -> [String: Int] {
        let rows = try await pool.query(
            "SELECT name || ':' || generation, count(*)::int8 FROM projection_dead_letters GROUP BY 1", logger: logger)
        var result: [String: Int] = [:]
        for try await (key, count) in rows.decode((String, Int).self) { result[key] = count }
        return result
    }

    /// How far a checkpoint is behind the feed: events not yet applied, and the age of the oldest.
    public func lag(after checkpoint: FeedPosition, now: Date) async throws -> (events: Int, seconds: Double) {
        let rows = try await pool.query(
            """
            SELECT count(*)::int8, min(recorded_at) FROM event_log
            WHERE (tx_id, position) > (\(String(checkpoint.transaction))::text::xid8, \(checkpoint.position))
            """, logger: logger)
        for try await (count, oldest) in rows.decode((Int, Date?).self) {
            return (count, oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
        }
        return (0, 0)
    }

    /// Per projection: whether a generation is being built beside the active one, and how old the oldest
    /// event the active one has not applied is (0 when none), as `upshift_projection_lag_seconds` has it.
    public func freshness(now: Date) async throws -> [String: (rebuilding: Bool, lagSeconds: Double)] {
        let rows = try await pool.query(
            """
            SELECT p.name, bool_or(p.state = 'building') OVER (PARTITION BY p.name), p.state,
                   (SELECT e.recorded_at FROM event_log e WHERE (e.tx_id, e.position) > (p.last_tx, p.last_pos)
                    ORDER BY e.tx_id, e.position LIMIT 1)
            FROM projections p WHERE p.state IN ('active', 'building')
            """, logger: logger)
        var result: [String: (rebuilding: Bool, lagSeconds: Double)] = [:]
        for try await (name, rebuilding, state, oldest) in rows.decode((String, Bool, String, Date?).self) where state == "active" {
            result[name] = (rebuilding, oldest.map { max(0, now.timeIntervalSince($0)) } ?? 0)
        }
        return result
    }

    /// The highest position handed out so far (an estimate of the feed's length, for progress).
    public func feedLength() async throws -> Int64 {
        let rows = try await pool.query(
            "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM event_log_position_seq", logger: logger)
        for try await value in rows.decode(Int64.self) { return value }
        return 0
    }

    // MARK: Leadership

    /// Runs `body` as the only runner of `generation` of `definition` across all instances, holding a
    /// session advisory lock on one connection for as long as `body` runs. Returns nil at once when
    /// another runner holds it (this one stands by), after ending the session of a holder that stopped
    /// answering (``LeaderHeartbeat``). Each statement of the leader must finish within `limit`, and fails
    /// as soon as its connection closes; a heartbeat beside them closes the connection when PostgreSQL
    /// stops answering on it.
    public func lead<T: Sendable>(
        _ definition: any ProjectionDefinition, generation: Int, limit: Duration,
        _ body: @escaping @Sendable (ProjectionLeader) async throws -> T
    ) async throws -> T? {
        let key = "upshift:projection:\(definition.name):\(generation)"
        let role = "projection \(definition.name):\(generation)"
        return try await pool.withConnection { connection in
            guard try await AdvisoryLeadership.lock(key, on: connection, role: role, limit: limit, logger: logger) else { return nil }
            return try await LeaderHeartbeat.beside(connection, role: role, probe: sessionState, logger: logger) { heartbeat in
                let leader = ProjectionLeader(
                    connection: heartbeat.leaderConnection, heartbeat: heartbeat, definition: definition, generation: generation, limit: limit,
                    logger: logger)
                do {
                    let result = try await body(leader)
                    await leader.unlock(key)
                    return result
                } catch {
                    await leader.unlock(key)
                    throw error
                }
            }
        }
    }

    /// The state of session `pid` in `pg_stat_activity` (nil when it is gone), asked on another connection
    /// of the pool: how a leader whose statement takes long tells a busy session from a lost one.
    @Sendable func sessionState(_ pid: Int32) async throws -> (state: String, seconds: Double)? {
        for try await (state, seconds) in try await pool.query(
            """
            SELECT coalesce(state, ''), coalesce(extract(epoch FROM now() - state_change), 0)::float8
            FROM pg_stat_activity WHERE pid = \(pid)
            """, logger: logger
        ).decode((String, Double).self) {
            return (state, seconds)
        }
        return nil
    }

    // MARK: Helpers

    /// Stores events a projection could not apply, and logs each.
    /// The generations (`name:generation`, active or building) for which `behind` holds (over the row `p`
    /// of `projections`), and each of `projections` that has no active generation at all (a first start
    /// has not created it yet: it will read the whole log).
    static func generationsBehind(_ behind: SQL, projections: [String], on pool: DatabasePool, logger: Logger)
        async throws -> [String]
    {
        let rows = try await pool.query(
            """
            SELECT p.name || ':' || p.generation FROM projections p
            WHERE p.state IN ('active', 'building') AND \(behind)
            UNION ALL
            SELECT n || ' (no active generation yet)' FROM unnest(\(projections)::text[]) AS n
            WHERE NOT EXISTS (SELECT 1 FROM projections p WHERE p.name = n AND p.state = 'active')
            ORDER BY 1
            """, logger: logger)
        var names: [String] = []
        for try await name in rows.decode(String.self) { names.append(name) }
        return names
    }

    static func storeDeadLetters(
        _ dead: [DeadLetter], projection: String, generation: Int, on connection: StoreConnection, logger: Logger
    ) async throws {
        guard !dead.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO projection_dead_letters (name, generation, tx_id, position, event_id, occurred_at, type, error)
            SELECT \(projection), \(generation), tx::xid8, pos, id, occurred_at, type, error
            FROM unnest(\(dead.map { String($0.event.feedPosition.transaction) })::text[],
                        \(dead.map(\.event.feedPosition.position))::int8[], \(dead.map(\.event.id))::uuid[],
                        \(dead.map(\.event.occurredAt))::timestamptz[], \(dead.map(\.event.type))::text[],
                        \(dead.map(\.error))::text[]) AS d(tx, pos, id, occurred_at, type, error)
            ON CONFLICT DO NOTHING
            """, logger: logger)
        for letter in dead {
            logger.warning(
                "event dead-lettered",
                metadata: ["projection": "\(projection)", "event.id": "\(letter.event.id)", "error": "\(letter.error)"])
        }
    }

    private static func lockRegistry(_ connection: StoreConnection, logger: Logger) async throws {
        try await connection.query("SELECT pg_advisory_xact_lock(hashtext('upshift:projections'))", logger: logger)
    }

    /// Registry rows, all of them or those of one projection generation.
    static func generations(
        on connection: StoreConnection, only: (name: String, generation: Int)? = nil, logger: Logger
    ) async throws -> [ProjectionGeneration] {
        let rows = try await connection.query(
            """
            SELECT name, generation, version, state, last_tx::text, last_pos, max_recorded_at, events, updated_at
            FROM projections
            WHERE \(only == nil) OR (name = \(only?.name ?? "") AND generation = \(only?.generation ?? 0))
            ORDER BY name, generation
            """, logger: logger)
        var result: [ProjectionGeneration] = []
        for try await row in rows.decode((String, Int, Int, String, String, Int64, Date?, Int64, Date).self) {
            result.append(
                ProjectionGeneration(
                    name: row.0, generation: row.1, version: row.2, state: ProjectionGeneration.State(rawValue: row.3) ?? .retired,
                    checkpoint: FeedPosition(transaction: UInt64(row.4) ?? 0, position: row.5), maxRecordedAt: row.6,
                    events: row.7, updatedAt: row.8))
        }
        return result
    }

    @discardableResult
    private static func create(
        _ definition: any ProjectionDefinition, state: ProjectionGeneration.State, existing: [ProjectionGeneration],
        on connection: StoreConnection, logger: Logger
    ) async throws -> ProjectionGeneration {
        // One past the highest registered (read under the registry lock); leftovers of a dropped
        // generation with that number are cleared first.
        let generation = (existing.map(\.generation).max() ?? 0) + 1
        for table in definition.tables {
            try await connection.query(
                "DROP TABLE IF EXISTS \(ProjectionTables.name(table, generation: generation))", logger: logger)
        }
        for statement in definition.createStatements({ ProjectionTables.name($0, generation: generation) }) {
            try await connection.query(statement, logger: logger)
        }
        try await connection.query(
            """
            INSERT INTO projections (name, generation, version, state, activated_at, history_from)
            VALUES (\(definition.name), \(generation), \(definition.version), \(state.rawValue),
                    CASE WHEN \(state.rawValue) = 'active' THEN now() END, (SELECT kept_from FROM log_retention))
            """, logger: logger)
        logger.info(
            "projection generation created",
            metadata: ["projection": "\(definition.name)", "generation": "\(generation)", "state": "\(state.rawValue)"])
        return ProjectionGeneration(
            name: definition.name, generation: generation, version: definition.version, state: state,
            checkpoint: .start, maxRecordedAt: nil, events: 0, updatedAt: Date())
    }
}

