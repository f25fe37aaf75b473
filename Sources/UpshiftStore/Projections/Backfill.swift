import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A projection's catch-up set-based: every event of the feed up to `through`, applied to a generation
/// whose tables were empty and whose checkpoint is at the start of the log.
///
/// Batches cost each projection an upsert or two per event, which tops out near 10,000 events/s;
/// a backfill lets PostgreSQL sort and group the whole log instead. Each definition states its
/// projection's rules a second time, in SQL, with the same results as its fold: the same rows and the
/// same dead letters (`ProjectionRunnerTests`, `ReportGroundTruthTests` and
/// `RebuildEquivalenceTests` rebuild with both and compare). Versions are still parsed by `Version`,
/// once per distinct spelling (`VersionSpellings`).
///
/// The writes go in steps that commit with the count of steps done: a transaction has a transaction id
/// from its first write to its commit, and while it has one it holds back the feed of every projection
/// and reader (docs/ARCHITECTURE.md, "The horizon is cluster-wide"). Small writes are a step of one
/// transaction (``step(_:on:_:)``). The statements that write a row per install (or more) are split into
/// install ranges (``chunks``, ``installs(_:in:)``), which bounds their sorts, and each range is read by one
/// read-only statement (a cursor, which takes no transaction id however long it sorts) whose rows are written
/// in transactions of at most ``Options/rowsPerWrite`` rows, inside PostgreSQL
/// (``chunkedInsert(_:into:columns:where:on:select:)``) or through this process when it must look at
/// them (``streamed(_:on:select:clear:write:finish:)``).
/// A restart skips the steps that committed, clears what the interrupted step wrote, and continues
/// with the same bound.
public struct Backfill: Sendable {
    /// How a backfill runs.
    public struct Options: Sendable {
        /// Events of the log per install range of the statements that write a row per install (or more).
        public var chunkEvents = 16_000_000
        /// Rows per transaction of a step that writes a row per install (or more); with ``writeTarget``,
        /// the most.
        public var rowsPerWrite = 20_000
        /// When set, the rows of each such transaction follow how long the last ones took, so that each
        /// holds a transaction id (and with it every feed, docs/ARCHITECTURE.md, "The horizon is
        /// cluster-wide") about this long: for a rebuild, beside projections that serve
        /// (``WriteSizer``).
        public var writeTarget: Duration?
        /// After each step, a pause this many times as long as the step (0: none), leaving the machine
        /// to the projections that serve meanwhile; above 0 the statements also run without parallel
        /// workers.
        public var rest: Double = 0
        /// Tests only: runs after each committed step, with the projection, the step's name and its
        /// number; what it throws stops the attempt there.
        public var afterStep: (@Sendable (_ projection: String, _ step: String, _ number: Int) async throws -> Void)?
        /// Tests only: runs after each committed write of a step that writes in several (not after its
        /// last, which commits the step), with the projection and the step's name; what it throws stops
        /// the attempt there, within the step.
        public var afterWrite: (@Sendable (_ projection: String, _ step: String) async throws -> Void)?

        public init() {}
    }

    public let projection: String
    public let generation: Int
    /// The last event applied: everything at or before it in the feed, all of it committed.
    public let through: FeedPosition
    /// The largest `recorded_at` of those events.
    public let maxRecordedAt: Date
    /// How many install ranges the statements that write a row per install (or more) are split into.
    public let chunks: Int
    let options: Options
    let progress: Progress
    let logger: Logger
    /// Waits out a rest: the leader's connection is idle meanwhile, and its heartbeat goes on there.
    let rest: @Sendable (Duration) async throws -> Void

    /// `committedSteps`: the steps an earlier attempt committed; `resumed`: an earlier attempt began
    /// this backfill (and may have stopped within step `committedSteps + 1`).
    init(
        projection: String, generation: Int, through: FeedPosition, maxRecordedAt: Date, chunks: Int, options: Options,
        committedSteps: Int, resumed: Bool, logger: Logger,
        rest: @escaping @Sendable (Duration) async throws -> Void = { try await Task.sleep(for: $0) }
    ) {
        self.projection = projection
        self.generation = generation
        self.through = through
        self.maxRecordedAt = maxRecordedAt
        self.chunks = max(1, chunks)
        var options = options
        options.rest = max(0, options.rest)
        options.rowsPerWrite = max(1, options.rowsPerWrite)
        self.options = options
        self.progress = Progress(committed: committedSteps, resumed: resumed)
        self.logger = logger
        self.rest = rest
    }

    /// What the steps of one attempt did: the steps reached (done, or skipped as committed before) and
    /// the dead letters written.
    final class Progress: @unchecked Sendable {
        let committed: Int
        /// The step an earlier attempt may have left half written, if any.
        let interrupted: Int?
        private let lock = NSLock()
        private var reached = 0
        private var letters = 0

        init(committed: Int, resumed: Bool) {
            self.committed = committed
            self.interrupted = resumed ? committed + 1 : nil
        }

        /// The number of the next step.
        func next() -> Int {
            lock.withLock {
                reached += 1
                return reached
            }
        }

        func add(deadLetters count: Int) { lock.withLock { letters += count } }
        var deadLetters: Int { lock.withLock { letters } }
    }

    /// Dead letters written by this attempt's steps.
    public var deadLetters: Int { progress.deadLetters }

    /// The generation's name for a table.
    public func table(_ base: String) -> SQLIdentifier { ProjectionTables.name(base, generation: generation) }

    /// Condition on the event alias `e`: the event is part of this backfill.
    var included: SQL {
        "(e.tx_id, e.position) <= (\(String(through.transaction))::text::xid8, \(through.position))"
    }

    /// Runs `body` as the next step, in a transaction of its own that also counts the step as done;
    /// skips it when an earlier attempt of this backfill committed it.
    func step(_ name: String, on connection: StoreConnection, _ body: (StoreConnection) async throws -> Void) async throws {
        let index = progress.next()
        guard index > progress.committed else { return }
        let started = ContinuousClock.now
        try await connection.transaction(logger: logger) { connection in
            try await body(connection)
            try await commit(step: index, on: connection)
        }
        try await finished(step: index, name, started: started)
    }

    /// Runs `select`, a read-only statement, as the next step: its rows are computed first, by a cursor
    /// (which takes no transaction id however long it sorts), and handed to `write` in batches of at most
    /// ``Options/rowsPerWrite``, each batch written in a transaction of its own by the statements `write`
    /// returns; the last transaction also runs `finish` (writes that must happen once, with the step)
    /// and counts the step as done. When an earlier attempt stopped within this step, the first
    /// transaction first runs `clear`, which removes what `write`'s statements wrote. Skipped when an
    /// earlier attempt committed it. (The rows go through this process: for a step that needs them
    /// here. ``chunkedInsert(_:into:columns:where:on:select:)`` keeps them inside PostgreSQL.)
    func streamed(
        _ name: String, on connection: StoreConnection, select: SQL, clear: SQL,
        write: (RowBatch) -> [SQL], finish: () -> [SQL] = { [] }
    ) async throws {
        let logger = logger
        var arrayTypes: [UInt32: UInt32] = [:]
        try await cursorStep(name, on: connection, select: select, clear: clear, finish: finish) { connection, rows in
            let batch = try await RowBatch.fetch(rows, from: Self.cursor, arrayTypes: &arrayTypes, on: connection, logger: logger)
            if batch.count > 0 {
                for statement in write(batch) { try await connection.query(statement, logger: logger) }
            }
            return batch.count
        }
    }

    /// The cursor of a streamed step (as `cursorStep` declares it).
    private static let cursor = "backfill_rows"

    /// Declares `select` as the cursor ``cursor`` (WITH HOLD: its rows are computed when the declaring
    /// transaction commits, without a transaction id) and then runs `write`, which writes the cursor's
    /// next rows (at most the number it is given: ``Options/rowsPerWrite``, or fewer with
    /// ``Options/writeTarget``) and says how many it read, in a transaction each time until it reads
    /// fewer; with `clear` first in the first transaction when an earlier attempt stopped within this
    /// step, and `finish` and the step's count in the last.
    private func cursorStep(
        _ name: String, on connection: StoreConnection, select: SQL, clear: SQL, finish: () -> [SQL],
        write: (StoreConnection, _ rows: Int) async throws -> Int
    ) async throws {
        let index = progress.next()
        guard index > progress.committed else { return }
        let started = ContinuousClock.now
        let logger = logger
        var sizer = WriteSizer(maximum: options.rowsPerWrite)
        try await connection.transaction(logger: logger) { connection in
            try await connection.query("CLOSE ALL", logger: logger)
            try await connection.query("DECLARE backfill_rows NO SCROLL CURSOR WITH HOLD FOR \(select)", logger: logger)
        }
        do {
            var first = true
            while true {
                let began = ContinuousClock.now
                let rows = options.writeTarget == nil ? options.rowsPerWrite : sizer.rows
                let last = try await connection.transaction(logger: logger) { connection in
                    if first && progress.interrupted == index { try await connection.query(clear, logger: logger) }
                    let last = try await write(connection, rows) < rows
                    if last {
                        for statement in finish() { try await connection.query(statement, logger: logger) }
                        try await commit(step: index, on: connection)
                    }
                    return last
                }
                first = false
                if last { break }
                if let target = options.writeTarget {
                    sizer.record(rows: rows, took: ContinuousClock.now - began, target: target)
                }
                try await options.afterWrite?(projection, name)
            }
            try await connection.query("CLOSE backfill_rows", logger: logger)
        } catch {
            _ = try? await connection.query("CLOSE ALL", logger: logger)
            throw error
        }
        try await finished(step: index, name, started: started)
    }

    /// Counts step `index` as done, in the transaction that commits it.
    private func commit(step index: Int, on connection: StoreConnection) async throws {
        try await connection.query(
            """
            UPDATE projections SET backfill_steps = \(index)
            WHERE name = \(projection) AND generation = \(generation) AND backfill_steps = \(index - 1)
            """, logger: logger)
    }

    /// After step `index` committed: logs it, runs the test hook, and rests.
    private func finished(step index: Int, _ name: String, started: ContinuousClock.Instant) async throws {
        let took = ContinuousClock.now - started
        logger.debug(
            "projection backfill step committed",
            metadata: ["projection": "\(projection)", "step": "\(index) \(name)", "duration": "\(took)"])
        try await options.afterStep?(projection, name, index)
        if options.rest > 0 { try await rest(took * options.rest) }
    }

    /// Runs `select` once per install range (`installs(_:in:)` on its install column), each range a
    /// step whose rows go from its cursor into `columns` of `table` (the rows' columns in that order, of
    /// those columns' types) inside PostgreSQL, through `upshift_fetch` (sql/0012), in transactions of at
    /// most ``Options/rowsPerWrite`` rows. `clear` removes the rows of a range (`where` and the range),
    /// for a range an earlier attempt left half written.
    func chunkedInsert(
        _ name: String, into table: SQLIdentifier, columns: [String], where condition: SQL = "true",
        on connection: StoreConnection, select: (_ chunk: Int) -> SQL
    ) async throws {
        let list = SQL.joined(columns.map { "\(SQLIdentifier($0))" }, separator: ", ")
        // The rows' record type, for `upshift_fetch`: the columns as the table declares them.
        var types: [String: String] = [:]
        for try await (column, type) in try await connection.query(
            """
            SELECT attname::text, format_type(atttypid, atttypmod) FROM pg_attribute
            WHERE attrelid = \(table.name)::regclass AND attnum > 0 AND NOT attisdropped
            """, logger: logger
        ).decode((String, String).self) { types[column] = type }
        let record = try SQL.joined(
            columns.map { column in
                guard let type = types[column].flatMap(Self.recordType) else {
                    throw UnwritableColumn(table: table.name, column: column, type: types[column])
                }
                return "\(SQLIdentifier(column)) \(type)"
            }, separator: ", ")
        let logger = logger
        for chunk in 0..<chunks {
            try await cursorStep(
                "\(name) \(chunk + 1)/\(chunks)", on: connection, select: select(chunk),
                clear: "DELETE FROM \(table) WHERE \(condition) AND \(installs("install_id", in: chunk))", finish: { [] }
            ) { connection, rows in
                var written = 0
                for try await count in try await connection.query(
                    """
                    WITH written AS (
                        INSERT INTO \(table) (\(list))
                        SELECT * FROM upshift_fetch(\(Self.cursor)::refcursor, \(rows)) AS r(\(record))
                        RETURNING 1)
                    SELECT count(*)::int8 FROM written
                    """, logger: logger
                ).decode(Int.self) { written = count }
                return written
            }
        }
    }

    /// The type of a record's column as SQL text, for a column of type `type` (as `format_type` writes
    /// it): the types of the projections' tables.
    static func recordType(_ type: String) -> SQL? {
        switch type {
        case "text": "text"
        case "uuid": "uuid"
        case "boolean": "boolean"
        case "integer": "integer"
        case "bigint": "bigint"
        case "date": "date"
        case "timestamp with time zone": "timestamptz"
        default: nil
        }
    }

    /// A column `chunkedInsert` was asked to write that its table does not have, or of a type it
    /// does not know.
    struct UnwritableColumn: Error, CustomStringConvertible {
        let table: String
        let column: String
        let type: String?
        var description: String { "table \(table): column \(column) " + (type.map { "has type \($0), not one a backfill writes" } ?? "does not exist") }
    }

    /// Condition: the install id `column` lies in range `chunk` of ``chunks`` (equal ranges of the UUIDs'
    /// first 32 bits; true for every install when there is one range).
    func installs(_ column: SQL, in chunk: Int) -> SQL {
        guard chunks > 1 else { return "true" }
        func bound(_ index: Int) -> UUID {
            let prefix = String(UInt32((UInt64(index) << 32) / UInt64(chunks)), radix: 16)
            return UUID(uuidString: String(repeating: "0", count: 8 - prefix.count) + prefix + "-0000-0000-0000-000000000000")!
        }
        switch chunk {
        case 0: return "\(column) < \(bound(1))"
        case chunks - 1: return "\(column) >= \(bound(chunk))"
        default: return "\(column) >= \(bound(chunk)) AND \(column) < \(bound(chunk + 1))"
        }
    }

    /// Stores as dead letters, in a step, the events `e` of `from` (FROM and JOINs, with `versions`
    /// available as a CTE) that match `condition` and for which `error` (an SQL expression) is not null.
    /// The error is tested before `condition`, which may be costlier.
    func deadLetter(
        error: SQL, from: SQL, where condition: SQL = "true", versions: VersionSpellings, on connection: StoreConnection
    ) async throws {
        let (projection, generation, logger, included, progress) = (projection, generation, logger, included, progress)
        try await step("dead letters", on: connection) { connection in
            let rows = try await connection.query(
                """
                WITH \(versions.cte),
                stored AS (
                    INSERT INTO projection_dead_letters (name, generation, tx_id, position, event_id, occurred_at, type, error)
                    SELECT \(projection), \(generation), e.tx_id, e.position, e.event_id, e.occurred_at, e.type, \(error)
                    \(from)
                    WHERE \(included) AND (\(error)) IS NOT NULL AND \(condition)
                    ON CONFLICT DO NOTHING
                    RETURNING 1
                )
                SELECT count(*)::int8 FROM stored
                """ as SQL, logger: logger)
            for try await count in rows.decode(Int.self) { progress.add(deadLetters: count) }
        }
    }

    /// The dead letters of `ProjectionEvent.installFacts` among the events `e` that match `condition`.
    func deadLetterInstallFacts(
        where condition: SQL = "true", versions: VersionSpellings, on connection: StoreConnection
    ) async throws {
        try await deadLetter(
            error: Self.installFactsError, from: "FROM event_log e LEFT JOIN versions v ON v.raw = e.app_version",
            where: condition, versions: versions, on: connection)
    }

    /// Why `ProjectionEvent.installFacts` refuses an event (NULL when it accepts it or skips it as one
    /// without an install), over the event `e` and its version `v` (LEFT JOIN `versions` on `app_version`).
    /// The texts are the fold's.
    static let installFactsError: SQL = """
        CASE WHEN e.install_id IS NULL THEN
                CASE WHEN e.type = ANY(\(ProjectionEvent.typesWithoutInstall)::text[]) THEN NULL
                     ELSE 'event has no installId' END
             WHEN coalesce(e.platform, '') = '' THEN 'event has no platform'
             WHEN e.app_version IS NULL THEN 'appVersion is missing is not a version'
             WHEN v.raw IS NULL THEN 'appVersion ''' || e.app_version || ''' is not a version'
        END
        """

    /// `'x'` or `is missing`, as the fold's messages show a field.
    static func quoted(_ expression: SQL) -> SQL {
        "coalesce('''' || (\(expression)) || '''', 'is missing')"
    }
}

/// The valid version spellings among the backfilled events, parsed by `Version` once each and bound
/// as three arrays: the CTE `versions(raw, normalized, sort_key)` reads them.
struct VersionSpellings: Sendable {
    var raw: [String] = []
    var normalized: [String] = []
    var sortKeys: [String] = []

    /// `versions(raw, normalized, sort_key)`, for a statement's `WITH`.
    var cte: SQL {
        "versions(raw, normalized, sort_key) AS (SELECT * FROM unnest(\(raw)::text[], \(normalized)::text[], \(sortKeys)::text[]))"
    }

    /// The distinct values of the SQL `expressions` (over `e`) among the events of `backfill` that
    /// match `condition`.
    static func load(
        _ expressions: [SQL], where condition: SQL, backfill: Backfill, on connection: StoreConnection
    ) async throws -> VersionSpellings {
        let values = SQL.joined(expressions.map { "(\($0))" }, separator: ", ")
        let rows = try await connection.query(
            """
            SELECT DISTINCT l.text FROM event_log e
            CROSS JOIN LATERAL (VALUES \(values)) AS l(text)
            WHERE \(backfill.included) AND \(condition) AND l.text IS NOT NULL
            """ as SQL, logger: backfill.logger)
        var spellings = VersionSpellings()
        var cache = VersionCache()
        for try await text in rows.decode(String.self) {
            guard let parsed = cache.parse(text) else { continue }
            spellings.raw.append(text)
            spellings.normalized.append(parsed.normalized)
            spellings.sortKeys.append(parsed.sortKey)
        }
        return spellings
    }
}
