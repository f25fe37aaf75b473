import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// What a report read, and how fresh it is.
public struct ReportRead<Value: Sendable>: Sendable {
    public var value: Value
    /// The `recorded_at` of the newest event the projections the report read had applied, in the same
    /// snapshot as `value`: the oldest of them when it read several, nil while one has applied none.
    public var dataAsOf: Date?
}

/// The report queries of DESIGN.md section 6, over the active generation of each projection. The pool
/// may be a streaming replica's (`UPSHIFT_REPORTS_DATABASE_URL`): every query here reads only the
/// projections' registry and tables, and each report reads them in one snapshot.
public struct ReportStore: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Thrown when a projection has no active generation yet (the server has not started its runner).
    public struct NotReady: Error, CustomStringConvertible {
        public let projection: String
        public var description: String { "projection \(projection) has no active generation yet" }

        public init(projection: String) {
            self.projection = projection
        }
    }

    /// The tables of the active generations, as one report's snapshot saw them.
    struct Tables: Sendable {
        let generations: [String: Int]

        func name(_ base: String, of projection: String) -> SQLIdentifier {
            ProjectionTables.name(base, generation: generations[projection]!)
        }
    }

    /// Runs `body` in one read-only `REPEATABLE READ` transaction: the registry (each active generation
    /// and its `max_recorded_at`) and the read models are one snapshot, so `dataAsOf` is exactly how
    /// fresh the figures are, on whichever server the pool reads (a replica's snapshot holds what it
    /// has replayed). Throws ``NotReady`` when one of `projections` has no active generation.
    private func read<T: Sendable>(
        _ projections: [String], _ body: @escaping @Sendable (PostgresConnection, Tables) async throws -> T
    ) async throws -> ReportRead<T> {
        let logger = logger
        return try await pool.transaction(logger: logger) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            var generations: [String: Int] = [:]
            var recorded: [String: Date?] = [:]
            for try await (name, generation, maxRecordedAt) in try await connection.query(
                "SELECT name, generation, max_recorded_at FROM projections WHERE state = 'active'", logger: logger
            ).decode((String, Int, Date?).self) {
                generations[name] = generation
                recorded[name] = maxRecordedAt
            }
            for name in projections where generations[name] == nil { throw NotReady(projection: name) }
            let value = try await body(connection, Tables(generations: generations))
            // The oldest of the projections read; one that has applied nothing makes it nil.
            let times = projections.map { recorded[$0] ?? nil }
            let dataAsOf = times.contains { $0 == nil } ? nil : times.compactMap { $0 }.min()
            return ReportRead(value: value, dataAsOf: dataAsOf)
        }
    }

    /// `adoption_daily` cells of an app and platform within [from, to].
    public func adoption(app: String, platform: String, from: UTCDay, to: UTCDay) async throws
        -> ReportRead<[(day: UTCDay, version: String, sortKey: String, installs: Int)]>
    {
        try await read(["adoption"]) { [logger] connection, tables in
            let rows = try await connection.query(
                """
                SELECT day::text, version, version_key, installs FROM \(tables.name("adoption_daily", of: "adoption"))
                WHERE app_id = \(app) AND platform = \(platform)
                  AND day BETWEEN \(from.description)::date AND \(to.description)::date
                """, logger: logger)
            var result: [(day: UTCDay, version: String, sortKey: String, installs: Int)] = []
            for try await (day, version, key, installs) in rows.decode((String, String, String, Int).self) {
                guard let day = UTCDay(day) else { continue }
                result.append((day, version, key, installs))
            }
            return result
        }
    }

    /// A release's cohort and time-to-update figures, or nil when the projection does not know it.
    public struct ReleaseFigures: Sendable {
        public var releasedAt: Date
        public var cohort: Int
        /// Updated cohort installs by ⌈T / 1 day⌉.
        public var updatedByDay: [Int: Int]
        public var medianMilliseconds: Int64?
        public var p90Milliseconds: Int64?
    }

    public func release(app: String, platform: String, version: Version) async throws -> ReportRead<ReleaseFigures>? {
        let found = try await read(["release_cohorts", "install_state"]) { [logger] connection, tables in
            try await Self.releaseFigures(
                app: app, platform: platform, version: version, tables: tables, on: connection, logger: logger)
        }
        return found.value.map { ReportRead(value: $0, dataAsOf: found.dataAsOf) }
    }

    private static func releaseFigures(
        app: String, platform: String, version: Version, tables: Tables, on connection: PostgresConnection, logger: Logger
    ) async throws -> ReleaseFigures? {
        let name = version.normalized
        let found = try await connection.query(
            """
            SELECT released_at FROM \(tables.name("release_cohorts", of: "release_cohorts"))
            WHERE app_id = \(app) AND platform = \(platform) AND version = \(name)
            """, logger: logger)
        var releasedAt: Date?
        for try await date in found.decode(Date.self) { releasedAt = date }
        guard let releasedAt else { return nil }
        // T per cohort install: its first time on a version ≥ the release, at or after the release. A
        // join, not a lookup per install, so that PostgreSQL can hash it: at 1 M installs a cohort has
        // hundreds of thousands.
        let rows = try await connection.query(
            """
            WITH members AS MATERIALIZED (
                SELECT install_id FROM \(tables.name("release_installs", of: "release_cohorts"))
                WHERE app_id = \(app) AND platform = \(platform) AND version = \(name) AND below
            ),
            updated AS (
                SELECT install_id, min(first_at) AS first_at
                FROM \(tables.name("install_versions", of: "install_state"))
                WHERE app_id = \(app) AND platform = \(platform) AND version_key >= \(version.sortKey)
                  AND first_at >= \(releasedAt.forPostgres)
                GROUP BY install_id
            ),
            t AS MATERIALIZED (
                SELECT (extract(epoch FROM (u.first_at - \(releasedAt.forPostgres))) * 1000)::int8 AS ms
                FROM members m LEFT JOIN updated u USING (install_id)
            ),
            cohort AS (SELECT count(*)::int8 AS c FROM t),
            ranked AS (SELECT ms, row_number() OVER (ORDER BY ms) AS rn FROM t WHERE ms IS NOT NULL)
            SELECT 'cohort', c, 0::int8 FROM cohort
            UNION ALL
            SELECT 'day', ceil(ms / 86400000.0)::int8, count(*)::int8 FROM t WHERE ms IS NOT NULL GROUP BY 2
            UNION ALL
            SELECT 'median', ms, 0::int8 FROM ranked, cohort WHERE rn = (50 * c + 99) / 100
            UNION ALL
            SELECT 'p90', ms, 0::int8 FROM ranked, cohort WHERE rn = (90 * c + 99) / 100
            """, logger: logger)
        var figures = ReleaseFigures(releasedAt: releasedAt, cohort: 0, updatedByDay: [:])
        for try await (kind, value, count) in rows.decode((String, Int64, Int64).self) {
            switch kind {
            case "cohort": figures.cohort = Int(value)
            case "day": figures.updatedByDay[Int(value)] = Int(count)
            case "median": figures.medianMilliseconds = value
            default: figures.p90Milliseconds = value
            }
        }
        return figures
    }

    /// Prompt funnels of an app and platform, for one target version or all.
    public func funnels(app: String, platform: String, target: Version?) async throws
        -> ReportRead<[PromptFunnelReport.Funnel]>
    {
        try await read(["prompt_funnel", "install_state"]) { [logger] connection, tables in
            try await Self.funnelRows(
                app: app, platform: platform, target: target, tables: tables, on: connection, logger: logger)
        }
    }

    private static func funnelRows(
        app: String, platform: String, target: Version?, tables: Tables, on connection: PostgresConnection, logger: Logger
    ) async throws -> [PromptFunnelReport.Funnel] {
        // Conversion by a join of the prompted installs with their versions, not a lookup per install.
        let rows = try await connection.query(
            """
            WITH p AS MATERIALIZED (
                SELECT * FROM \(tables.name("prompt_installs", of: "prompt_funnel"))
                WHERE app_id = \(app) AND platform = \(platform)
                  AND (\(target?.normalized)::text IS NULL OR target_version = \(target?.normalized))
            ),
            converted AS (
                SELECT DISTINCT p.target_version, p.kind, p.install_id
                FROM p JOIN \(tables.name("install_versions", of: "install_state")) iv
                  ON iv.app_id = p.app_id AND iv.platform = p.platform AND iv.install_id = p.install_id
                WHERE iv.version_key >= p.target_key AND iv.first_at >= p.first_shown_at
                  AND iv.first_at <= p.first_shown_at + make_interval(days => \(PromptFunnelReport.conversionDays)::int4)
            )
            SELECT p.target_version, p.kind,
                   count(*) FILTER (WHERE p.first_shown_at IS NOT NULL)::int8,
                   count(*) FILTER (WHERE p.dismissed_later)::int8,
                   count(*) FILTER (WHERE p.dismissed_skip)::int8,
                   count(*) FILTER (WHERE p.update_started)::int8,
                   count(*) FILTER (WHERE p.blocked)::int8,
                   count(c.install_id)::int8
            FROM p LEFT JOIN converted c USING (target_version, kind, install_id)
            GROUP BY p.target_version, p.target_key, p.kind
            ORDER BY p.target_key, p.kind
            """, logger: logger)
        var funnels: [PromptFunnelReport.Funnel] = []
        for try await row in rows.decode((String, String, Int, Int, Int, Int, Int, Int).self) {
            funnels.append(
                PromptFunnelReport.Funnel(
                    targetVersion: row.0, promptKind: row.1, shown: row.2, dismissedLater: row.3, dismissedSkip: row.4,
                    updateStarted: row.5, blocked: row.6, converted: row.7))
        }
        return funnels
    }

    /// Installs last seen at or after `since`, by current version and OS version.
    public func activeInstalls(app: String, platform: String, since: Date) async throws
        -> ReportRead<[(version: String, osVersion: String?, installs: Int)]>
    {
        try await read(["install_state"]) { [logger] connection, tables in
            let rows = try await connection.query(
                """
                SELECT version, os_version, count(*)::int8 FROM \(tables.name("install_state", of: "install_state"))
                WHERE app_id = \(app) AND platform = \(platform) AND last_seen >= \(since.forPostgres)
                GROUP BY version, os_version
                """, logger: logger)
            var result: [(version: String, osVersion: String?, installs: Int)] = []
            for try await row in rows.decode((String, String?, Int).self) { result.append(row) }
            return result
        }
    }
}
