import Foundation
import PostgresNIO
import UpshiftCore

/// `install_state` (docs/PROJECTIONS.md, "What the reports count"), and how many installs were last seen
/// in each hour (`install_activity`) and each day (`install_activity_daily`), by version and OS: the
/// minimum-impact report sums whole days, then whole hours, and counts installs only for the rest of one
/// hour.
public struct InstallStateProjection: ProjectionDefinition {
    public let name = "install_state"
    /// 2: the activity tables added; `install_versions` moved to the projections that derive from it.
    /// 3: the channel of each install's latest check (what the policy backtest counts it in).
    public let version = 3
    public let tables = ["install_state", "install_activity", "install_activity_daily"]

    public init() {}

    /// Stands for "never checked" in the array of check times a batch sends (an array of timestamps
    /// holds no NULL here); the statement reads any time before year 1000 as NULL.
    static let neverChecked = Date.distantPast

    /// The hour (since the epoch, UTC) an install last seen at `column` is counted in.
    static func hour(_ column: SQL) -> SQL { "floor(extract(epoch FROM \(column)) / 3600)::int4" }

    public func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL] {
        [
            """
            CREATE TABLE \(t("install_state")) (
                app_id     text        NOT NULL,
                install_id uuid        NOT NULL,
                platform   text        NOT NULL,
                first_seen timestamptz NOT NULL,
                last_seen  timestamptz NOT NULL,
                version    text        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                os_version text,
                locale     text,
                checked_at timestamptz,  -- of the latest `checked` event; NULL: never checked
                channel    text,         -- of that check
                PRIMARY KEY (app_id, install_id)
            )
            """,
            "CREATE INDEX \(t("install_state").appending("_recent")) ON \(t("install_state")) (app_id, platform, last_seen)",
            """
            CREATE TABLE \(t("install_activity")) (
                app_id     text    NOT NULL,
                platform   text    NOT NULL,
                hour       integer NOT NULL,  -- of last_seen, since the epoch
                version    text    NOT NULL,
                os_version text    NOT NULL,  -- '' when the install reported none
                installs   integer NOT NULL,
                PRIMARY KEY (app_id, platform, hour, version, os_version)
            )
            """,
            """
            CREATE TABLE \(t("install_activity_daily")) (
                app_id     text    NOT NULL,
                platform   text    NOT NULL,
                day        integer NOT NULL,  -- of last_seen, since the epoch (UTC): hour / 24
                version    text    NOT NULL,
                os_version text    NOT NULL,
                installs   integer NOT NULL,
                PRIMARY KEY (app_id, platform, day, version, os_version)
            )
            """,
        ]
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        let output = InstallStateFold.fold(events)
        batch.deadLetters += output.deadLetters
        guard !output.states.isEmpty else { return }
        let rows = output.states
        let (state, hourly, daily) = (
            batch.table("install_state"), batch.table("install_activity"), batch.table("install_activity_daily")
        )
        // One statement: the rows as they were (`old`, the statement's snapshot) and as they are after the
        // merge (`new`) move each install from its old hour (and day), version and OS cell to its new one.
        let cells = try await connection.query(
            """
            WITH u(app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale,
                   checked_at, channel) AS (
                SELECT app_id, install_id, platform, first_seen, last_seen, version, version_key,
                       NULLIF(os_version, ''), NULLIF(locale, ''),
                       CASE WHEN checked_at > '1000-01-01' THEN checked_at END, NULLIF(channel, '')
                FROM unnest(\(rows.map(\.key.appId))::text[], \(rows.map(\.key.installId))::uuid[],
                            \(rows.map(\.platform))::text[], \(rows.map(\.firstSeen.forPostgres))::timestamptz[],
                            \(rows.map(\.lastSeen.forPostgres))::timestamptz[], \(rows.map(\.version))::text[],
                            \(rows.map(\.versionSortKey))::text[], \(rows.map { $0.osVersion ?? "" })::text[],
                            \(rows.map { $0.locale ?? "" })::text[], \(rows.map { ($0.checkedAt ?? Self.neverChecked).forPostgres })::timestamptz[],
                            \(rows.map { $0.channel ?? "" })::text[])
                     AS x(app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale,
                          checked_at, channel)
            ),
            old AS (
                SELECT s.app_id, s.platform, s.last_seen, s.version, s.os_version FROM \(state) s JOIN u USING (app_id, install_id)
            ),
            new AS (
                INSERT INTO \(state) AS s
                    (app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale,
                     checked_at, channel)
                SELECT * FROM u
                ON CONFLICT (app_id, install_id) DO UPDATE SET
                    checked_at = GREATEST(s.checked_at, excluded.checked_at),
                    channel = CASE WHEN excluded.checked_at >= s.checked_at OR s.checked_at IS NULL
                                   THEN coalesce(excluded.channel, s.channel) ELSE s.channel END,
                    first_seen = LEAST(s.first_seen, excluded.first_seen),
                    last_seen = GREATEST(s.last_seen, excluded.last_seen),
                    platform = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.platform ELSE s.platform END,
                    version = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.version ELSE s.version END,
                    version_key = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.version_key ELSE s.version_key END,
                    os_version = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.os_version ELSE s.os_version END,
                    locale = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.locale ELSE s.locale END
                RETURNING s.app_id, s.platform, s.last_seen, s.version, s.os_version
            ),
            moves AS (
                SELECT app_id, platform, \(Self.hour("last_seen")) AS hour, version, coalesce(os_version, '') AS os_version,
                       sum(delta)::int4 AS delta
                FROM (SELECT *, -1 AS delta FROM old UNION ALL SELECT *, 1 FROM new) AS m
                GROUP BY 1, 2, 3, 4, 5 HAVING sum(delta) <> 0
            ),
            hours AS (
                INSERT INTO \(hourly) AS a (app_id, platform, hour, version, os_version, installs)
                SELECT * FROM moves
                ON CONFLICT (app_id, platform, hour, version, os_version) DO UPDATE SET installs = a.installs + excluded.installs
                RETURNING false AS daily, a.app_id, a.platform, a.hour AS cell, a.version, a.os_version, a.installs
            ),
            days AS (
                INSERT INTO \(daily) AS a (app_id, platform, day, version, os_version, installs)
                SELECT app_id, platform, hour / 24, version, os_version, sum(delta)::int4 FROM moves
                GROUP BY 1, 2, 3, 4, 5 HAVING sum(delta) <> 0
                ON CONFLICT (app_id, platform, day, version, os_version) DO UPDATE SET installs = a.installs + excluded.installs
                RETURNING true AS daily, a.app_id, a.platform, a.day AS cell, a.version, a.os_version, a.installs
            )
            SELECT * FROM hours UNION ALL SELECT * FROM days
            """ as SQL, logger: batch.logger)
        try await deleteEmptied(cells, in: batch, on: connection)
    }

    /// The installs' rows go, and each activity cell loses the installs it counted of them.
    public func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws {
        let (state, hourly, daily) = (
            batch.table("install_state"), batch.table("install_activity"), batch.table("install_activity_daily")
        )
        let cells = try await connection.query(
            """
            WITH gone AS (
                DELETE FROM \(state) s USING \(erased.pairs) AS k(app_id, install_id)
                WHERE s.app_id = k.app_id AND s.install_id = k.install_id
                RETURNING s.app_id, s.platform, \(Self.hour("s.last_seen")) AS hour, s.version,
                          coalesce(s.os_version, '') AS os_version
            ),
            moves AS (
                SELECT app_id, platform, hour, version, os_version, count(*)::int4 AS n FROM gone GROUP BY 1, 2, 3, 4, 5
            ),
            hours AS (
                UPDATE \(hourly) a SET installs = a.installs - m.n FROM moves m
                WHERE a.app_id = m.app_id AND a.platform = m.platform AND a.hour = m.hour AND a.version = m.version
                  AND a.os_version = m.os_version
                RETURNING false AS daily, a.app_id, a.platform, a.hour AS cell, a.version, a.os_version, a.installs
            ),
            days AS (
                UPDATE \(daily) a SET installs = a.installs - m.n
                FROM (SELECT app_id, platform, hour / 24 AS day, version, os_version, sum(n)::int4 AS n
                      FROM moves GROUP BY 1, 2, 3, 4, 5) m
                WHERE a.app_id = m.app_id AND a.platform = m.platform AND a.day = m.day AND a.version = m.version
                  AND a.os_version = m.os_version
                RETURNING true AS daily, a.app_id, a.platform, a.day AS cell, a.version, a.os_version, a.installs
            )
            SELECT * FROM hours UNION ALL SELECT * FROM days
            """ as SQL, logger: batch.logger)
        try await deleteEmptied(cells, in: batch, on: connection)
    }

    /// Deletes the activity cells among `cells` (rows of `daily, app_id, platform, cell, version,
    /// os_version, installs` as they are now) that reached zero, as a rebuild would never write them.
    private func deleteEmptied(_ cells: Rows, in batch: ProjectionBatch, on connection: StoreConnection) async throws {
        let (hourly, daily) = (batch.table("install_activity"), batch.table("install_activity_daily"))
        var emptied: [Bool: [(String, String, Int, String, String)]] = [:]
        for try await (daily, app, platform, cell, version, os, installs)
            in cells.decode((Bool, String, String, Int, String, String, Int).self) where installs == 0
        {
            emptied[daily, default: []].append((app, platform, cell, version, os))
        }
        for (isDaily, cells) in emptied {
            let (table, column): (SQLIdentifier, SQLIdentifier) = isDaily ? (daily, SQLIdentifier("day")) : (hourly, SQLIdentifier("hour"))
            try await connection.query(
                """
                DELETE FROM \(table) a
                USING unnest(\(cells.map(\.0))::text[], \(cells.map(\.1))::text[], \(cells.map(\.2))::int4[],
                             \(cells.map(\.3))::text[], \(cells.map(\.4))::text[]) AS z(app_id, platform, cell, version, os_version)
                WHERE a.app_id = z.app_id AND a.platform = z.platform AND a.\(column) = z.cell AND a.version = z.version
                  AND a.os_version = z.os_version AND a.installs = 0
                """, logger: batch.logger)
        }
    }

    public func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws {
        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        let (state, hourly, daily) = (
            backfill.table("install_state"), backfill.table("install_activity"), backfill.table("install_activity_daily")
        )
        // The latest event of each install (ties: the later in the feed), and the earliest time. Sorts and
        // groups lead with the install: a leading key that rarely differs (the app) makes every
        // comparison fall through to the next key, three times slower.
        try await backfill.chunkedInsert(
            "install_state", into: state,
            columns: [
                "app_id", "install_id", "platform", "first_seen", "last_seen", "version", "version_key", "os_version", "locale",
                "checked_at", "channel",
            ],
            on: connection
        ) { chunk in
                """
                WITH \(versions.cte)
                SELECT DISTINCT ON (e.install_id, e.app_id)
                       e.app_id, e.install_id, e.platform, min(e.occurred_at) OVER install, e.occurred_at, v.normalized,
                       v.sort_key, NULLIF(e.data->>'osVersion', ''), NULLIF(e.data->>'locale', ''),
                       (array_agg(e.occurred_at) FILTER (WHERE e.type = 'checked') OVER install)[1],
                       (array_agg(coalesce(e.data->>'channel', 'live')) FILTER (WHERE e.type = 'checked') OVER install)[1]
                FROM event_log e JOIN versions v ON v.raw = e.app_version
                WHERE \(backfill.included) AND e.install_id IS NOT NULL AND e.platform <> ''
                  AND \(backfill.installs("e.install_id", in: chunk))
                WINDOW install AS (
                    PARTITION BY e.install_id, e.app_id ORDER BY e.occurred_at DESC, e.tx_id DESC, e.position DESC
                    ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
                ORDER BY e.install_id, e.app_id, e.occurred_at DESC, e.tx_id DESC, e.position DESC
                """
        }
        try await backfill.step("install_activity", on: connection) { connection in
            try await connection.query(
                """
                INSERT INTO \(hourly) (app_id, platform, hour, version, os_version, installs)
                SELECT app_id, platform, \(Self.hour("last_seen")), version, coalesce(os_version, ''), count(*)
                FROM \(state)
                GROUP BY 1, 2, 3, 4, 5
                """ as SQL, logger: backfill.logger)
            try await connection.query(
                """
                INSERT INTO \(daily) (app_id, platform, day, version, os_version, installs)
                SELECT app_id, platform, hour / 24, version, os_version, sum(installs)::int4
                FROM \(hourly)
                GROUP BY 1, 2, 3, 4, 5
                """ as SQL, logger: backfill.logger)
        }
        try await backfill.deadLetterInstallFacts(versions: versions, on: connection)
    }
}
