import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A projection's catch-up in one set-based pass: every event of the feed up to `through`, applied at
/// once to a generation whose tables are empty and whose checkpoint is at the start of the log.
///
/// Batches cost each projection an upsert or two per event, which tops out near 10,000 events/s;
/// a backfill lets PostgreSQL sort and group the whole log instead. Each definition states its
/// projection's rules a second time, in SQL, with the same results as its fold: the same rows and the
/// same dead letters (`ProjectionRunnerTests`, `ReportGroundTruthTests` and
/// `RebuildEquivalenceTests` rebuild with both and compare). Versions are still parsed by `Version`,
/// once per distinct spelling (`VersionSpellings`).
public struct Backfill: Sendable {
    public let projection: String
    public let generation: Int
    /// The last event applied: everything at or before it in the feed, all of it committed.
    public let through: FeedPosition
    /// The largest `recorded_at` of those events (the adoption horizon).
    public let maxRecordedAt: Date
    /// Dead letters written so far.
    public var deadLetters = 0
    let logger: Logger

    /// The generation's name for a table.
    public func table(_ base: String) -> SQLIdentifier { ProjectionTables.name(base, generation: generation) }

    /// Condition on the event alias `e`: the event is part of this backfill.
    var included: SQL {
        "(e.tx_id, e.position) <= (\(String(through.transaction))::text::xid8, \(through.position))"
    }

    /// Stores as dead letters the events `e` of `from` (FROM and JOINs, with `versions` available as
    /// a CTE) that match `condition` and for which `error` (an SQL expression) is not null. The error
    /// is tested before `condition`, which may be costlier.
    mutating func deadLetter(
        error: SQL, from: SQL, where condition: SQL = "true", versions: VersionSpellings, on connection: PostgresConnection
    ) async throws {
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
        for try await count in rows.decode(Int.self) { deadLetters += count }
    }

    /// The dead letters of `ProjectionEvent.installFacts` among the events `e` that match `condition`.
    mutating func deadLetterInstallFacts(
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
