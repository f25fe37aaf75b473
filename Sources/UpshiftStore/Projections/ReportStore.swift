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
    /// The instant from which those projections count events, in the same snapshot: the latest start of
    /// the ones read when retention had dropped months of the log before they were built; nil when they
    /// count the whole log (docs/OPERATIONS.md, "Retention").
    public var eventsFrom: Date?
}

/// The report queries (docs/PROJECTIONS.md, "What the reports count"), over the active generation of
/// each projection. The pool may be a streaming replica's (`UPSHIFT_REPORTS_DATABASE_URL`): every query here
/// reads only the projections' registry and tables, and each report reads them in one snapshot.
public struct ReportStore: Sendable {
    let pool: DatabasePool
    let logger: Logger
    /// Above this many pages (8 KiB each; 1,000 hold some 50,000 installs), the backtest reads the ids of
    /// `install_state` in two halves at once (``backtestInstalls(app:platform:since:idsBelow:)``).
    let backtestSplitPages: Int

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger, backtestSplitPages: Int = 1_000) {
        self.pool = pool
        self.logger = logger
        self.backtestSplitPages = backtestSplitPages
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
        _ projections: [String], _ body: @escaping @Sendable (StoreConnection, Tables) async throws -> T
    ) async throws -> ReportRead<T> {
        let logger = logger
        return try await pool.transaction(logger: logger) { connection in
            try await connection.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
            var generations: [String: Int] = [:]
            var recorded: [String: Date?] = [:]
            var historyFrom: [String: Date] = [:]
            for try await (name, generation, maxRecordedAt, from) in try await connection.query(
                "SELECT name, generation, max_recorded_at, history_from FROM projections WHERE state = 'active'", logger: logger
            ).decode((String, Int, Date?, Date?).self) {
                generations[name] = generation
                recorded[name] = maxRecordedAt
                historyFrom[name] = from
            }
            for name in projections where generations[name] == nil { throw NotReady(projection: name) }
            let value = try await body(connection, Tables(generations: generations))
            // The oldest of the projections read; one that has applied nothing makes it nil.
            let times = projections.map { recorded[$0] ?? nil }
            let dataAsOf = times.contains { $0 == nil } ? nil : times.compactMap { $0 }.min()
            return ReportRead(value: value, dataAsOf: dataAsOf, eventsFrom: projections.compactMap { historyFrom[$0] }.max())
        }
    }

    /// `adoption_daily` cells of an app and platform within [from, to].
    public func adoption(app: AppID, platform: Platform, from: UTCDay, to: UTCDay) async throws
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
        /// `health_daily` of the release, and of `previous`, summed over the OS majors, by day.
        public var health: [UTCDay: HealthCounts] = [:]
        public var previousHealth: [UTCDay: HealthCounts] = [:]
    }

    /// `previous`: the release whose health the report compares with (``ReleaseHealth/previous(of:among:)``).
    public func release(app: AppID, platform: Platform, version: Version, previous: Version?) async throws
        -> ReportRead<ReleaseFigures>?
    {
        let found = try await read(["release_cohorts", "adoption"]) { [logger] connection, tables in
            guard var figures = try await Self.releaseFigures(
                app: app, platform: platform, version: version, tables: tables, on: connection, logger: logger)
            else { return nil as ReleaseFigures? }
            let versions = [version.normalized] + (previous.map { [$0.normalized] } ?? [])
            for try await (name, day, installs, exited) in try await connection.query(
                """
                SELECT version, day::text, sum(installs)::int8, sum(exited)::int8
                FROM \(tables.name("health_daily", of: "adoption"))
                WHERE app_id = \(app) AND platform = \(platform) AND version = ANY(\(versions)::text[])
                GROUP BY 1, 2
                """, logger: logger
            ).decode((String, String, Int, Int).self) {
                guard let day = UTCDay(day) else { continue }
                let counts = HealthCounts(installs: installs, exited: exited)
                if name == version.normalized { figures.health[day] = counts } else { figures.previousHealth[day] = counts }
            }
            return figures
        }
        return found.value.map { ReportRead(value: $0, dataAsOf: found.dataAsOf, eventsFrom: found.eventsFrom) }
    }

    /// The health cohorts of `versions` (``HealthCohortCell``, from `release_health`), and whether each has
    /// an abnormal exit on record (`health_daily`, as the release report's baseline has it), in one snapshot.
    public func healthCohorts(app: AppID, platform: Platform, versions: [String]) async throws
        -> ReportRead<[String: (cells: [HealthCohortCell], exits: Bool)]>
    {
        try await read(["release_health", "adoption"]) { [logger] connection, tables in
            var result: [String: (cells: [HealthCohortCell], exits: Bool)] = [:]
            for version in versions { result[version] = ([], false) }
            for try await (version, os, day, installs, exited) in try await connection.query(
                """
                SELECT version, os_major, day::text, installs, exited FROM \(tables.name("health_cohorts", of: "release_health"))
                WHERE app_id = \(app) AND platform = \(platform) AND version = ANY(\(versions)::text[])
                """, logger: logger
            ).decode((String, String, String, Int, Int).self) {
                guard let day = UTCDay(day) else { continue }
                result[version]?.cells.append(HealthCohortCell(osMajor: os, day: day, installs: installs, exited: exited))
            }
            for try await version in try await connection.query(
                """
                SELECT DISTINCT version FROM \(tables.name("health_daily", of: "adoption"))
                WHERE app_id = \(app) AND platform = \(platform) AND version = ANY(\(versions)::text[]) AND exited > 0
                """, logger: logger
            ).decode(String.self) {
                result[version]?.exits = true
            }
            return result
        }
    }

    /// Read from the figures the projection keeps per release: the cohort, the updated installs per hour
    /// of T, and the median and p90 found inside their hour (a few rows of an index), whatever the fleet's size.
    private static func releaseFigures(
        app: AppID, platform: Platform, version: Version, tables: Tables, on connection: StoreConnection, logger: Logger
    ) async throws -> ReleaseFigures? {
        let name = version.normalized
        let found = try await connection.query(
            """
            SELECT released_at, cohort FROM \(tables.name("release_cohorts", of: "release_cohorts"))
            WHERE app_id = \(app) AND platform = \(platform) AND version = \(name)
            """, logger: logger)
        var release: (releasedAt: Date, cohort: Int)?
        for try await row in found.decode((Date, Int).self) { release = row }
        guard let (releasedAt, cohort) = release else { return nil }
        var figures = ReleaseFigures(releasedAt: releasedAt, cohort: cohort, updatedByDay: [:])
        var hours: [(hour: Int, installs: Int)] = []
        for try await row in try await connection.query(
            """
            SELECT hour, installs FROM \(tables.name("release_updates", of: "release_cohorts"))
            WHERE app_id = \(app) AND platform = \(platform) AND version = \(name) ORDER BY hour
            """, logger: logger
        ).decode((Int, Int).self) {
            hours.append(row)
            figures.updatedByDay[ReleaseProgress.day(hour: row.0), default: 0] += row.1
        }
        // The k-th smallest T by nearest rank (k = ⌈q · cohort⌉), null while fewer than k have updated.
        func quantile(_ percent: Int) async throws -> Int64? {
            let rank = (percent * cohort + 99) / 100
            guard rank > 0 else { return nil }
            var before = 0
            for (hour, installs) in hours {
                guard before + installs >= rank else {
                    before += installs
                    continue
                }
                let range = ReleaseProgress.microsecondRange(hour: hour)
                func after(_ offset: Int64) -> Date {
                    Date(timeIntervalSince1970: Double(releasedAt.microseconds + offset) / 1_000_000).forPostgres
                }
                let (lower, upper) = (after(range.lower), after(range.upper))
                let rows = try await connection.query(
                    """
                    SELECT (extract(epoch FROM (reached_at - \(releasedAt.forPostgres))) * 1000)::int8
                    FROM \(tables.name("release_installs", of: "release_cohorts"))
                    WHERE app_id = \(app) AND platform = \(platform) AND version = \(name) AND counted_hour IS NOT NULL
                      AND reached_at >= \(lower) AND reached_at < \(upper)
                    ORDER BY reached_at OFFSET \(rank - before - 1) LIMIT 1
                    """, logger: logger)
                for try await milliseconds in rows.decode(Int64.self) { return milliseconds }
                return nil
            }
            return nil
        }
        figures.medianMilliseconds = try await quantile(50)
        figures.p90Milliseconds = try await quantile(90)
        return figures
    }

    /// Prompt funnels of an app and platform, for one target version or all: the projection's rows per
    /// target and kind.
    public func funnels(app: AppID, platform: Platform, target: Version?) async throws
        -> ReportRead<[PromptFunnelReport.Funnel]>
    {
        try await read(["prompt_funnel"]) { [logger] connection, tables in
            let rows = try await connection.query(
                """
                SELECT target_version, kind, shown, dismissed_later, dismissed_skip, update_started, blocked, converted,
                       updated_after_start
                FROM \(tables.name("prompt_summary", of: "prompt_funnel"))
                WHERE app_id = \(app) AND platform = \(platform)
                  AND (\(target?.normalized)::text IS NULL OR target_version = \(target?.normalized))
                ORDER BY target_key, kind
                """, logger: logger)
            var funnels: [PromptFunnelReport.Funnel] = []
            for try await row in rows.decode((String, String, Int, Int, Int, Int, Int, Int, Int).self) {
                funnels.append(
                    PromptFunnelReport.Funnel(
                        targetVersion: row.0, promptKind: row.1, shown: row.2, dismissedLater: row.3, dismissedSkip: row.4,
                        updateStarted: row.5, blocked: row.6, converted: row.7, updatedAfterStart: row.8))
            }
            return funnels
        }
    }

    /// The installs that started updating to `target` (an `update_started` for it, of either prompt kind)
    /// whose 24 hours have passed, and of those the unfinished: no `updated` to a version ≥ `target` was
    /// recorded within 24 hours of the first start's recording (docs/PROJECTIONS.md, "Unfinished updates").
    /// A start's 24 hours have passed once they end by `now` and by the newest event the projection applied,
    /// so that an `updated` still on its way through the feed is never missed.
    public func unfinishedStarts(app: AppID, platform: Platform, target: Version, now: Date) async throws
        -> ReportRead<(started: Int, unfinished: Int)>
    {
        try await read(["prompt_funnel"]) { [logger] connection, tables in
            let rows = try await connection.query(
                """
                WITH judged AS (
                    SELECT p.install_id, min(p.first_started_recorded_at) AS started_at, min(p.target_key) AS target_key
                    FROM \(tables.name("prompt_installs", of: "prompt_funnel")) p
                    WHERE p.app_id = \(app) AND p.platform = \(platform) AND p.target_version = \(target.normalized)
                      AND p.first_started_recorded_at IS NOT NULL
                    GROUP BY p.install_id
                    HAVING min(p.first_started_recorded_at) + interval '24 hours' <= least(
                        \(now)::timestamptz,
                        (SELECT max_recorded_at FROM projections
                         WHERE name = 'prompt_funnel' AND generation = \(tables.generations["prompt_funnel"]!)))
                )
                SELECT count(*)::int8, count(*) FILTER (WHERE NOT EXISTS (
                    SELECT 1 FROM \(tables.name("prompt_updates", of: "prompt_funnel")) u
                    WHERE u.app_id = \(app) AND u.platform = \(platform) AND u.install_id = j.install_id
                      AND u.recorded_at BETWEEN j.started_at AND j.started_at + interval '24 hours'
                      AND u.version_key >= j.target_key))::int8
                FROM judged j
                """, logger: logger)
            for try await (started, unfinished) in rows.decode((Int, Int).self) { return (started, unfinished) }
            return (0, 0)
        }
    }

    /// The installs of the backtest (`install_state`: last seen at or after `since`), by version, OS version
    /// and channel (`live` for an install that never checked). With `idsBelow`, a cohort whose installs'
    /// buckets may matter comes with their ids (one value per cohort, 16 bytes per install, read in the
    /// same pass: `version_key` compares as the versions do); every other cohort with its count.
    ///
    /// When neither ids nor channels matter (no partial rollout, no release in the beta channel), the
    /// counts are the projection's installs last seen per day and hour (``activeInstalls(app:platform:since:)``),
    /// every cohort in the live channel: no install is read but those of `since`'s hour.
    ///
    /// Reading a million installs one by one is PostgreSQL's work of half a second or more with their ids
    /// (a scan and a grouping on one core), so a table of more than ``backtestSplitPages`` pages is read in two halves of
    /// its pages at once, the second on another connection of the pool that imports the first's snapshot
    /// (`pg_export_snapshot`): the halves see one state of the table, so no install is counted twice or
    /// missed. A pool with no connection free within its wait bound cannot lend a second: then the second
    /// half is read after the first, on the first's connection. A replica cannot export a snapshot, and a
    /// pool without bounds (a command of the CLI, a test) could wait for ever for a second connection:
    /// those read the table in one pass.
    public func backtestInstalls(
        app: AppID, platform: Platform, since: Date,
        idsBelow: Backtest.IDsBelow?, channelMatters: Bool = true
    ) async throws -> ReportRead<(counts: [Backtest.Cohort: Int], installs: [(Backtest.Cohort, Backtest.InstallIDs)])> {
        try await read(["install_state"]) { [logger, pool, backtestSplitPages] connection, tables in
            if idsBelow == nil && !channelMatters {
                var counts: [Backtest.Cohort: Int] = [:]
                for (version, os, installs) in try await Self.activeInstallCounts(
                    app: app, platform: platform, since: since, on: connection, tables: tables, logger: logger)
                {
                    counts[Backtest.Cohort(version: version, osVersion: os, channel: .live), default: 0] += installs
                }
                return (counts, [])
            }
            let state = tables.name("install_state", of: "install_state")
            // The ids as one value per cohort, 16 bytes each (no array to build or to decode), of the
            // installs below the newest partial release their channel sees.
            let (live, beta) = (idsBelow?.live?.sortKey ?? "", idsBelow?.beta.sortKey ?? "")
            @Sendable func cohorts(_ pages: SQL, on connection: StoreConnection) async throws
                -> [(Backtest.Cohort, count: Int, ids: ByteBuffer?)]
            {
                // Where no release is in the beta channel, every install is read as live: its channel, the
                // row's last column, is not read at all (a quarter of PostgreSQL's time for a million).
                let rows = try await connection.query(
                    channelMatters
                        ? """
                        SELECT version, os_version, coalesce(channel, 'live'), count(*)::int8,
                               string_agg(uuid_send(install_id), ''::bytea)
                                   FILTER (WHERE version_key < \(live) OR (channel = 'beta' AND version_key < \(beta)))
                        FROM \(state)
                        WHERE app_id = \(app) AND platform = \(platform) AND last_seen >= \(since.forPostgres)\(pages)
                        GROUP BY 1, 2, 3
                        """
                        : """
                        SELECT version, os_version, 'live', count(*)::int8,
                               string_agg(uuid_send(install_id), ''::bytea) FILTER (WHERE version_key < \(live))
                        FROM \(state)
                        WHERE app_id = \(app) AND platform = \(platform) AND last_seen >= \(since.forPostgres)\(pages)
                        GROUP BY 1, 2
                        """, logger: logger)
                var found: [(Backtest.Cohort, count: Int, ids: ByteBuffer?)] = []
                for try await (version, os, channel, count, ids) in rows.decode((String, String?, String, Int, ByteBuffer?).self) {
                    found.append((Backtest.Cohort(version: version, osVersion: os, channel: Channel(rawValue: channel) ?? .live), count, ids))
                }
                return found
            }
            var parts: [[(Backtest.Cohort, count: Int, ids: ByteBuffer?)]]
            let (pages, snapshot) = pool.bounds != nil
                ? try await Self.pagesAndSnapshot(of: state, above: backtestSplitPages, on: connection, logger: logger) : (0, nil)
            if let snapshot {
                let half = "(\(pages / 2),0)"
                let (first, second): (SQL, SQL) = (" AND ctid < \(half)::tid", " AND ctid >= \(half)::tid")
                async let other = pool.withConnection { other in
                    try await other.transaction(logger: logger) { other in
                        try await other.query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY", logger: logger)
                        try await other.query(SQL(trustedText: "SET TRANSACTION SNAPSHOT '\(snapshot)'"), logger: logger)
                        return try await cohorts(second, on: other)
                    }
                }
                parts = [try await cohorts(first, on: connection)]
                do {
                    parts.append(try await other)
                } catch let error as DatabaseUnavailable {
                    guard case .busy = error.reason else { throw error }
                    parts.append(try await cohorts(second, on: connection))
                }
            } else {
                parts = [try await cohorts("" as SQL, on: connection)]
            }
            var counts: [Backtest.Cohort: Int] = [:]
            var packed: [Backtest.Cohort: [UInt8]] = [:]
            for (cohort, count, ids) in parts.joined() {
                if var ids, let version = Version(cohort.version), idsBelow?.bucketMatters(version: version, channel: cohort.channel) == true {
                    packed[cohort, default: []] += ids.readBytes(length: ids.readableBytes) ?? []
                } else {
                    counts[cohort, default: 0] += count
                }
            }
            return (counts, packed.map { ($0.key, Backtest.InstallIDs(packed: $0.value)) })
        }
    }

    /// How many pages `table` has and, when more than `threshold`, the snapshot of `connection`'s transaction
    /// exported for another to import (nil on a replica, which cannot export one).
    private static func pagesAndSnapshot(
        of table: SQLIdentifier, above threshold: Int, on connection: StoreConnection, logger: Logger
    ) async throws -> (pages: Int, snapshot: String?) {
        let rows = try await connection.query(
            """
            SELECT pages, CASE WHEN pages > \(threshold) AND NOT pg_is_in_recovery() THEN pg_export_snapshot() END
            FROM (SELECT pg_relation_size(\(table.quoted)::regclass) / current_setting('block_size')::int8 AS pages) AS size
            """, logger: logger)
        for try await (pages, snapshot) in rows.decode((Int, String?).self) {
            // An id is hexadecimal digits and dashes (`00000003-0000001B-1`); it is written into a statement.
            let valid = snapshot.map { !$0.isEmpty && $0.utf8.allSatisfy { $0 == UInt8(ascii: "-") || ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x41 && $0 <= 0x46) } }
            return (pages, valid == true ? snapshot : nil)
        }
        return (0, nil)
    }

    /// Installs last seen at or after `since`, by current version and OS version (nil: none sent), from the
    /// projection's counts (``activeInstallCounts(app:platform:since:on:tables:logger:)``).
    public func activeInstalls(app: AppID, platform: Platform, since: Date) async throws
        -> ReportRead<[(version: String, osVersion: String?, installs: Int)]>
    {
        try await read(["install_state"]) { [logger] connection, tables in
            try await Self.activeInstallCounts(app: app, platform: platform, since: since, on: connection, tables: tables, logger: logger)
        }
    }

    /// Installs last seen at or after `since`, by current version and OS version: the days after the one
    /// `since` falls in, then that day's hours after `since`'s, from the projection's counts; the rest of
    /// `since`'s hour from the installs themselves. Some thousand rows read where `install_state` holds
    /// a row per install.
    private static func activeInstallCounts(
        app: AppID, platform: Platform, since: Date, on connection: StoreConnection, tables: Tables, logger: Logger
    ) async throws -> [(version: String, osVersion: String?, installs: Int)] {
        let hour = Int(floor(Double(since.microseconds) / 3_600_000_000))
        let day = hour >= 0 ? hour / 24 : (hour - 23) / 24
        let nextHour = Date(timeIntervalSince1970: Double(hour + 1) * 3_600).forPostgres
        let rows = try await connection.query(
            """
            SELECT version, NULLIF(os_version, ''), sum(installs)::int8 FROM (
                SELECT version, os_version, installs FROM \(tables.name("install_activity_daily", of: "install_state"))
                WHERE app_id = \(app) AND platform = \(platform) AND day > \(day)
                UNION ALL
                SELECT version, os_version, installs FROM \(tables.name("install_activity", of: "install_state"))
                WHERE app_id = \(app) AND platform = \(platform) AND hour > \(hour) AND hour < \((day + 1) * 24)
                UNION ALL
                SELECT version, coalesce(os_version, ''), 1 FROM \(tables.name("install_state", of: "install_state"))
                WHERE app_id = \(app) AND platform = \(platform)
                  AND last_seen >= \(since.forPostgres) AND last_seen < \(nextHour)
            ) AS active
            GROUP BY version, os_version
            """, logger: logger)
        var result: [(version: String, osVersion: String?, installs: Int)] = []
        for try await row in rows.decode((String, String?, Int).self) { result.append(row) }
        return result
    }
}
