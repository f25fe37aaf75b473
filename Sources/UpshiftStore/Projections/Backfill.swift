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
/// The writes go in steps (``step(_:on:_:)``), each a transaction of its own that commits with the
/// count of steps done: a transaction has a transaction id from its first write to its commit, and
/// while it has one it holds back the feed of every projection and reader (DESIGN.md 5.2). A step's
/// sorts and groups come first and take no id; its writes are bounded by splitting the statements that
/// write a row per install (or more) into install ranges (``chunks``, ``installs(_:in:)``). A restart
/// skips the steps that committed and continues with the same bound.
public struct Backfill: Sendable {
    public let projection: String
    public let generation: Int
    /// The last event applied: everything at or before it in the feed, all of it committed.
    public let through: FeedPosition
    /// The largest `recorded_at` of those events.
    public let maxRecordedAt: Date
    /// How many install ranges the statements that write a row per install (or more) are split into.
    public let chunks: Int
    /// After each step, a pause this many times as long as the step (0: none), leaving the machine to
    /// the projections that serve meanwhile.
    let rest: Double
    let progress: Progress
    let logger: Logger

    init(
        projection: String, generation: Int, through: FeedPosition, maxRecordedAt: Date, chunks: Int, rest: Double = 0,
        committedSteps: Int, afterStep: (@Sendable (_ projection: String, _ step: String, _ number: Int) async throws -> Void)?, logger: Logger
    ) {
        self.projection = projection
        self.generation = generation
        self.through = through
        self.maxRecordedAt = maxRecordedAt
        self.chunks = max(1, chunks)
        self.rest = max(0, rest)
        self.progress = Progress(committed: committedSteps, afterStep: afterStep)
        self.logger = logger
    }

    /// What the steps of one attempt did: the steps reached (done, or skipped as committed before) and
    /// the dead letters written.
    final class Progress: @unchecked Sendable {
        let committed: Int
        let afterStep: (@Sendable (_ projection: String, _ step: String, _ number: Int) async throws -> Void)?
        private let lock = NSLock()
        private var reached = 0
        private var letters = 0

        init(committed: Int, afterStep: (@Sendable (_ projection: String, _ step: String, _ number: Int) async throws -> Void)?) {
            self.committed = committed
            self.afterStep = afterStep
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
    func step(_ name: String, on connection: PostgresConnection, _ body: (PostgresConnection) async throws -> Void) async throws {
        let index = progress.next()
        guard index > progress.committed else { return }
        let started = ContinuousClock.now
        let (projection, generation, logger) = (projection, generation, logger)
        try await connection.transaction(logger: logger) { connection in
            try await body(connection)
            try await connection.query(
                """
                UPDATE projections SET backfill_steps = \(index)
                WHERE name = \(projection) AND generation = \(generation) AND backfill_steps = \(index - 1)
                """, logger: logger)
        }
        let took = ContinuousClock.now - started
        logger.debug(
            "projection backfill step committed",
            metadata: ["projection": "\(projection)", "step": "\(index) \(name)", "duration": "\(took)"])
        try await progress.afterStep?(projection, name, index)
        if rest > 0 { try await Task.sleep(for: took * rest) }
    }

    /// Runs `body` once per install range, each range a step (`name` and the range's number).
    func chunked(_ name: String, on connection: PostgresConnection, _ body: (PostgresConnection, Int) async throws -> Void)
        async throws
    {
        for chunk in 0..<chunks {
            try await step("\(name) \(chunk + 1)/\(chunks)", on: connection) { connection in try await body(connection, chunk) }
        }
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
        error: SQL, from: SQL, where condition: SQL = "true", versions: VersionSpellings, on connection: PostgresConnection
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
        where condition: SQL = "true", versions: VersionSpellings, on connection: PostgresConnection
    ) async throws {
        try await deadLetter(
            error: Self.installFactsError, from: "FROM event_log e LEFT JOIN versions v ON v.raw = e.app_version",
            where: condition, versions: versions, on: connection)
    }

    /// Why `ProjectionEvent.installFacts` refuses an event (NULL when it accepts it or skips it as a
    /// catalog event), over the event `e` and its version `v` (LEFT JOIN `versions` on `app_version`).
    /// The texts are the fold's.
    static let installFactsError: SQL = """
        CASE WHEN e.install_id IS NULL THEN
                CASE WHEN e.type = ANY(\(CatalogEvent.Kind.allCases.map(\.rawValue))::text[]) THEN NULL
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
        _ expressions: [SQL], where condition: SQL, backfill: Backfill, on connection: PostgresConnection
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
