import Foundation
import PostgresNIO
import UpshiftCore

/// Daily adoption and release health (docs/PROJECTIONS.md, "What the reports count"): `adoption_daily`
/// and `health_daily` counts, and `install_days`, the working state of the open window (each install's
/// last event per day, and the versions it reported an abnormal exit of that day), pruned as days close;
/// `adoption_horizons` holds each app's largest `recorded_at` read, which sets where its open window
/// starts.
public struct AdoptionProjection: ProjectionDefinition {
    public let name = "adoption"
    /// 3: release health (`health_daily`; `install_days` keeps the OS major and the exits).
    public let version = 3
    public let tables = ["install_days", "adoption_daily", "health_daily", "adoption_horizons"]

    public init() {}

    /// A day's figures depend on that day's events alone: those of the days a shorter log no longer holds
    /// are taken over whole from a generation of this version.
    public func carriedTables(fromVersion version: Int) -> [CarriedTable]? {
        guard version == self.version else { return nil }
        return [
            CarriedTable("adoption_daily", columns: ["app_id", "platform", "day", "version", "version_key", "installs"]),
            CarriedTable(
                "health_daily",
                columns: ["app_id", "platform", "version", "day", "os_major", "version_key", "installs", "exited"]),
        ]
    }

    public func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL] {
        [
            """
            CREATE TABLE \(t("install_days")) (
                app_id      text        NOT NULL,
                platform    text        NOT NULL,
                install_id  uuid        NOT NULL,
                day         date        NOT NULL,
                version     text        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                os_major    text        NOT NULL,  -- of the last event ('' when it had none)
                last_at     timestamptz NOT NULL,
                exited      text        NOT NULL,  -- versions with an abnormal_exit that day, sorted, ' ' between
                PRIMARY KEY (app_id, platform, install_id, day)
            )
            """,
            "CREATE INDEX \(t("install_days").appending("_day")) ON \(t("install_days")) (app_id, day)",
            """
            CREATE TABLE \(t("adoption_daily")) (
                app_id      text    NOT NULL,
                platform    text    NOT NULL,
                day         date    NOT NULL,
                version     text    NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                installs    integer NOT NULL,  -- no CHECK: it would test the -1 delta row before ON CONFLICT
                PRIMARY KEY (app_id, platform, day, version)
            )
            """,
            """
            CREATE TABLE \(t("health_daily")) (
                app_id      text    NOT NULL,
                platform    text    NOT NULL,
                version     text    NOT NULL,
                day         date    NOT NULL,
                os_major    text    NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                installs    integer NOT NULL,  -- as adoption_daily counts them, by the OS major of the last event
                exited      integer NOT NULL,  -- of those, the installs that reported an abnormal exit of version
                PRIMARY KEY (app_id, platform, version, day, os_major)
            )
            """,
            """
            CREATE TABLE \(t("adoption_horizons")) (
                app_id          text        PRIMARY KEY,
                max_recorded_at timestamptz NOT NULL  -- of the app's events read
            )
            """,
        ]
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        let keys = Array(AdoptionFold.keys(for: events))
        var stored: [InstallDayKey: InstallDay] = [:]
        if !keys.isEmpty {
            let rows = try await connection.query(
                """
                SELECT d.app_id, d.platform, d.install_id, d.day::text, d.version, d.version_key, d.os_major, d.last_at,
                       d.exited
                FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.platform))::text[],
                            \(keys.map(\.installId))::uuid[], \(keys.map(\.day.description))::text[]::date[])
                     AS k(app_id, platform, install_id, day)
                JOIN \(batch.table("install_days")) d USING (app_id, platform, install_id, day)
                """, logger: batch.logger)
            for try await row in rows.decode((AppID, Platform, UUID, String, String, String, String, Date, String).self) {
                guard let day = UTCDay(row.3) else { continue }
                stored[InstallDayKey(appId: row.0, platform: row.1, installId: row.2, day: day)] =
                    InstallDay(version: row.4, versionSortKey: row.5, osMajor: row.6, lastAt: row.7,
                               exited: InstallDay.exited(fromText: row.8))
            }
        }
        let apps = Array(Set(events.map(\.appId)))
        var maxima: [AppID: Date] = [:]
        for try await (app, recorded) in try await connection.query(
            """
            SELECT app_id, max_recorded_at FROM \(batch.table("adoption_horizons")) WHERE app_id = ANY(\(apps)::text[])
            """, logger: batch.logger
        ).decode((AppID, Date).self) { maxima[app] = recorded }
        let output = AdoptionFold.fold(events, stored: stored, maxRecordedAt: maxima)
        batch.deadLetters += output.deadLetters
        if output.closedDayEvents > 0 {
            batch.logger.warning(
                "events of closed days not counted", metadata: ["events": "\(output.closedDayEvents)"])
        }
        if !output.days.isEmpty {
            let keys = Array(output.days.keys)
            let values = keys.map { output.days[$0]! }
            try await connection.query(
                """
                INSERT INTO \(batch.table("install_days")) AS d
                    (app_id, platform, install_id, day, version, version_key, os_major, last_at, exited)
                SELECT app_id, platform, install_id, day::date, version, version_key, os_major, last_at, exited
                FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.platform))::text[],
                            \(keys.map(\.installId))::uuid[], \(keys.map(\.day.description))::text[],
                            \(values.map(\.version))::text[], \(values.map(\.versionSortKey))::text[],
                            \(values.map(\.osMajor))::text[], \(values.map(\.lastAt.forPostgres))::timestamptz[],
                            \(values.map(\.exitedText))::text[])
                     AS u(app_id, platform, install_id, day, version, version_key, os_major, last_at, exited)
                ON CONFLICT (app_id, platform, install_id, day) DO UPDATE SET
                    version = excluded.version, version_key = excluded.version_key, os_major = excluded.os_major,
                    last_at = excluded.last_at, exited = excluded.exited
                """, logger: batch.logger)
        }
        try await writeCells(output, in: batch, on: connection)
        // Each app whose horizon moved: its new largest recorded_at, and its closed days' state pruned.
        let moved = output.maxRecordedAt.filter { app, recorded in maxima[app].map { recorded > $0 } ?? true }
        guard !moved.isEmpty else { return }
        let movedApps = Array(moved.keys)
        try await connection.query(
            """
            INSERT INTO \(batch.table("adoption_horizons")) AS h (app_id, max_recorded_at)
            SELECT * FROM unnest(\(movedApps)::text[], \(movedApps.map { moved[$0]!.forPostgres })::timestamptz[])
            ON CONFLICT (app_id) DO UPDATE SET max_recorded_at = excluded.max_recorded_at
            """, logger: batch.logger)
        let closing = movedApps.compactMap { app -> (AppID, String)? in
            guard let after = AdoptionFold.horizon(maxRecordedAt: moved[app]) else { return nil }
            if let before = AdoptionFold.horizon(maxRecordedAt: maxima[app]), after <= before { return nil }
            return (app, after.description)
        }
        if !closing.isEmpty {
            try await connection.query(
                """
                DELETE FROM \(batch.table("install_days")) d
                USING unnest(\(closing.map(\.0))::text[], \(closing.map(\.1))::text[]) AS h(app_id, day)
                WHERE d.app_id = h.app_id AND d.day < h.day::date
                """, logger: batch.logger)
        }
    }

    /// Moves the adoption and health cells by `output`'s changes; a cell back at zero leaves no row.
    private func writeCells(_ output: AdoptionFold.Output, in batch: ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        if !output.cells.isEmpty {
            let cells = Array(output.cells.keys)
            let table = batch.table("adoption_daily")
            try await connection.query(
                """
                INSERT INTO \(table) AS a (app_id, platform, day, version, version_key, installs)
                SELECT app_id, platform, day::date, version, version_key, delta
                FROM unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                            \(cells.map(\.day.description))::text[], \(cells.map(\.version))::text[],
                            \(cells.map { output.versionSortKeys[$0.version] ?? "" })::text[],
                            \(cells.map { output.cells[$0]! })::int8[])
                     AS u(app_id, platform, day, version, version_key, delta)
                ON CONFLICT (app_id, platform, day, version) DO UPDATE SET installs = a.installs + excluded.installs
                """, logger: batch.logger)
            // A cell that went back to zero leaves no row, as if it had never been counted, so that
            // incremental processing and a rebuild leave the same rows however the feed was batched.
            try await connection.query(
                """
                DELETE FROM \(table) a
                USING unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                             \(cells.map(\.day.description))::text[], \(cells.map(\.version))::text[])
                      AS u(app_id, platform, day, version)
                WHERE a.installs = 0 AND a.app_id = u.app_id AND a.platform = u.platform AND a.day = u.day::date
                  AND a.version = u.version
                """, logger: batch.logger)
        }
        if !output.health.isEmpty {
            let cells = Array(output.health.keys)
            let counts = cells.map { output.health[$0]! }
            let table = batch.table("health_daily")
            try await connection.query(
                """
                INSERT INTO \(table) AS h (app_id, platform, version, day, os_major, version_key, installs, exited)
                SELECT app_id, platform, version, day::date, os_major, version_key, installs, exited
                FROM unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                            \(cells.map(\.version))::text[], \(cells.map(\.day.description))::text[],
                            \(cells.map(\.osMajor))::text[], \(cells.map { output.versionSortKeys[$0.version] ?? "" })::text[],
                            \(counts.map(\.installs))::int8[], \(counts.map(\.exited))::int8[])
                     AS u(app_id, platform, version, day, os_major, version_key, installs, exited)
                ON CONFLICT (app_id, platform, version, day, os_major) DO UPDATE SET
                    installs = h.installs + excluded.installs, exited = h.exited + excluded.exited
                """, logger: batch.logger)
            // As in adoption_daily: a cell back at zero leaves no row (exited never exceeds installs).
            try await connection.query(
                """
                DELETE FROM \(table) h
                USING unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                             \(cells.map(\.version))::text[], \(cells.map(\.day.description))::text[],
                             \(cells.map(\.osMajor))::text[])
                      AS u(app_id, platform, version, day, os_major)
                WHERE h.installs = 0 AND h.app_id = u.app_id AND h.platform = u.platform AND h.version = u.version
                  AND h.day = u.day::date AND h.os_major = u.os_major
                """, logger: batch.logger)
        }
    }

    /// The installs' working state goes, and each cell loses what their install-days counted: of the open
    /// days, as their state says; of closed days (state pruned), as their erased events that it counted say.
    public func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws {
        var stored: [InstallDayKey: InstallDay] = [:]
        let days = batch.table("install_days")
        let keys = try await erased.keys(in: days, on: connection, logger: batch.logger)
        let rows = try await connection.query(
            """
            DELETE FROM \(days) d USING \(keys) AS k(app_id, platform, install_id)
            WHERE d.app_id = k.app_id AND d.platform = k.platform AND d.install_id = k.install_id
            RETURNING d.app_id, d.platform, d.install_id, d.day::text, d.version, d.version_key, d.os_major, d.last_at,
                      d.exited
            """, logger: batch.logger)
        for try await row in rows.decode((AppID, Platform, UUID, String, String, String, String, Date, String).self) {
            guard let day = UTCDay(row.3) else { continue }
            stored[InstallDayKey(appId: row.0, platform: row.1, installId: row.2, day: day)] =
                InstallDay(version: row.4, versionSortKey: row.5, osMajor: row.6, lastAt: row.7,
                           exited: InstallDay.exited(fromText: row.8))
        }
        var horizons: [AppID: UTCDay] = [:]
        for try await (app, recorded) in try await connection.query(
            """
            SELECT app_id, max_recorded_at FROM \(batch.table("adoption_horizons"))
            WHERE app_id = ANY(\(Array(Set(erased.installs.map(\.appId))))::text[])
            """, logger: batch.logger
        ).decode((AppID, Date).self) { horizons[app] = AdoptionFold.horizon(maxRecordedAt: recorded) }
        let counted = erased.events.filter { !erased.uncountedByAdoption.contains($0.feedPosition) }
        try await writeCells(AdoptionFold.forget(stored: stored, erased: counted, horizons: horizons), in: batch, on: connection)
    }

    /// `OSMajor.of` in SQL, of the text expression `osVersion`.
    static func osMajor(_ osVersion: SQL) -> SQL { "coalesce(substring(\(osVersion) FROM '^[0-9]+'), '')" }

    public func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws {
        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        // The fold skips an event whose day had closed when it was read: its day is before the horizon
        // of the largest recorded_at of its app read so far, itself included. So an app's events of day d
        // count up to the first of the app's events in the feed recorded on day d + 32 or later, and not
        // from there on. (The first position of a day is the least [tx, position] pair: one pass, one
        // group per app and day.)
        let firstRecorded = try await connection.query(
            """
            SELECT e.app_id, (e.recorded_at AT TIME ZONE 'UTC')::date::text, min(ARRAY[e.tx_id::text::int8, e.position]),
                   min(e.occurred_at), max(e.recorded_at)
            FROM event_log e WHERE \(backfill.included) GROUP BY 1, 2
            """ as SQL, logger: backfill.logger)
        struct AppDays {
            var firsts: [(day: UTCDay, position: FeedPosition)] = []
            var earliest: UTCDay?
            var maxRecordedAt = Date.distantPast
        }
        var apps: [AppID: AppDays] = [:]
        for try await (app, day, first, occurred, recorded) in firstRecorded.decode((AppID, String, [Int64], Date, Date).self) {
            guard let day = UTCDay(day), first.count == 2 else { continue }
            apps[app, default: AppDays()].firsts.append((day, FeedPosition(transaction: UInt64(first[0]), position: first[1])))
            apps[app]!.earliest = min(apps[app]!.earliest ?? UTCDay(occurred), UTCDay(occurred))
            apps[app]!.maxRecordedAt = max(apps[app]!.maxRecordedAt, recorded)
        }
        var closing: (apps: [AppID], days: [String], transactions: [String], positions: [Int64]) = ([], [], [], [])
        var horizons: (apps: [AppID], days: [String], maxima: [Date]) = ([], [], [])
        for (app, recorded) in apps.sorted(by: { $0.key < $1.key }) {
            horizons.apps.append(app)
            horizons.days.append(AdoptionFold.horizon(maxRecordedAt: recorded.maxRecordedAt)!.description)
            horizons.maxima.append(recorded.maxRecordedAt.forPostgres)
            guard let earliest = recorded.earliest, let latest = recorded.firsts.map(\.day).max() else { continue }
            // From the latest recorded day down: the first position of any day at or after it.
            var from: [UTCDay: FeedPosition] = [:]
            var first: FeedPosition?
            for (day, position) in recorded.firsts.sorted(by: { $0.day > $1.day }) {
                first = min(first ?? position, position)
                from[day] = first
            }
            var next: FeedPosition?
            var day = latest.adding(days: -(AdoptionFold.openDays + 1))
            while day >= earliest {
                next = from[day.adding(days: AdoptionFold.openDays + 1)] ?? next
                if let next {
                    closing.apps.append(app)
                    closing.days.append(day.description)
                    closing.transactions.append(String(next.transaction))
                    closing.positions.append(next.position)
                }
                day = day.adding(days: -1)
            }
        }
        // Each install's last counted event of each day, with the versions it reported an abnormal exit of
        // that day; the days of each app's open window stay as working state. An install range per step:
        // the day counts of the ranges add up. The read gives both: the open window's rows (`installs`
        // NULL), then each day's counts per version and OS major (`install_id` NULL), which are added in the
        // step's last transaction, so that a range counts once.
        let (days, daily, health) = (backfill.table("install_days"), backfill.table("adoption_daily"), backfill.table("health_daily"))
        for chunk in 0..<backfill.chunks {
            var counts = RowBatch(columns: [], count: 0)
            let counted: SQL = """
                \(backfill.included) AND e.install_id IS NOT NULL AND e.platform <> ''
                AND \(backfill.installs("e.install_id", in: chunk))
                AND (c.day IS NULL OR (e.tx_id, e.position) < (c.tx, c.pos))
                """
            try await backfill.streamed(
                "install_days \(chunk + 1)/\(backfill.chunks)", on: connection,
                select: """
                    WITH \(versions.cte),
                    closing(app_id, day, tx, pos) AS (
                        SELECT a, d::date, t::xid8, p
                        FROM unnest(\(closing.apps)::text[], \(closing.days)::text[], \(closing.transactions)::text[],
                                    \(closing.positions)::int8[]) AS c(a, d, t, p)),
                    horizons(app_id, day) AS (
                        SELECT a, d::date FROM unnest(\(horizons.apps)::text[], \(horizons.days)::text[]) AS h(a, d)),
                    last AS MATERIALIZED (
                        SELECT DISTINCT ON (e.install_id, day, e.app_id, e.platform)
                               e.app_id, e.platform, e.install_id, (e.occurred_at AT TIME ZONE 'UTC')::date AS day,
                               v.normalized, v.sort_key, e.data->>'osVersion' AS os_version, e.occurred_at
                        FROM event_log e JOIN versions v ON v.raw = e.app_version
                        LEFT JOIN closing c ON c.app_id = e.app_id AND c.day = (e.occurred_at AT TIME ZONE 'UTC')::date
                        WHERE \(counted)
                        ORDER BY e.install_id, day, e.app_id, e.platform, e.occurred_at DESC, e.tx_id DESC, e.position DESC
                    ),
                    exits AS (
                        SELECT e.install_id, (e.occurred_at AT TIME ZONE 'UTC')::date AS day, e.app_id, e.platform,
                               string_agg(DISTINCT v.normalized COLLATE "C", ' ' ORDER BY v.normalized COLLATE "C") AS exited
                        FROM event_log e JOIN versions v ON v.raw = e.app_version
                        LEFT JOIN closing c ON c.app_id = e.app_id AND c.day = (e.occurred_at AT TIME ZONE 'UTC')::date
                        WHERE e.type = \(EventType.abnormalExit.rawValue) AND \(counted)
                        GROUP BY 1, 2, 3, 4
                    )
                    SELECT l.app_id, l.platform, l.install_id, l.day, l.normalized, l.sort_key, \(Self.osMajor("l.os_version")),
                           l.occurred_at, coalesce(x.exited, ''), NULL::int8, NULL::int8
                    FROM last l JOIN horizons h ON h.app_id = l.app_id
                    LEFT JOIN exits x ON x.install_id = l.install_id AND x.day = l.day AND x.app_id = l.app_id
                                     AND x.platform = l.platform
                    WHERE l.day >= h.day
                    UNION ALL
                    -- Grouped by the OS version first, and by its major only then: a few rows instead of one
                    -- per install and day go through the regular expression.
                    SELECT app_id, platform, NULL::uuid, day, normalized, min(sort_key), \(Self.osMajor("os_version")),
                           NULL::timestamptz, NULL::text, sum(installs)::int8, sum(exited)::int8
                    FROM (
                        SELECT l.app_id, l.platform, l.day, l.normalized, min(l.sort_key) AS sort_key, l.os_version,
                               count(*) AS installs,
                               count(*) FILTER (WHERE l.normalized = ANY(string_to_array(x.exited, ' '))) AS exited
                        FROM last l
                        LEFT JOIN exits x ON x.install_id = l.install_id AND x.day = l.day AND x.app_id = l.app_id
                                         AND x.platform = l.platform
                        GROUP BY l.day, l.normalized, l.os_version, l.app_id, l.platform
                    ) g
                    GROUP BY day, normalized, 7, app_id, platform
                    ORDER BY 1, 2, 3, 4
                    """,
                clear: "DELETE FROM \(days) WHERE \(backfill.installs("install_id", in: chunk))",
                write: { batch in
                    counts.append(batch.rows(whereNull: 2, true))
                    let open = batch.rows(whereNull: 9, true)
                    guard open.count > 0 else { return [] }
                    let columns = RowBatch(columns: Array(open.columns.prefix(9)), count: open.count)
                    return [
                        """
                        INSERT INTO \(days) (app_id, platform, install_id, day, version, version_key, os_major, last_at, exited)
                        SELECT * FROM unnest(\(columns.arrays))
                        """
                    ]
                },
                finish: {
                    guard counts.count > 0 else { return [] }
                    let cells: SQL = """
                        unnest(\(counts.arrays)) AS c(app_id, platform, install_id, day, version, version_key, os_major,
                                                      last_at, exited_versions, installs, exited)
                        """
                    return [
                        """
                        INSERT INTO \(daily) AS a (app_id, platform, day, version, version_key, installs)
                        SELECT app_id, platform, day, version, min(version_key), sum(installs)::int8
                        FROM \(cells) GROUP BY app_id, platform, day, version
                        ON CONFLICT (app_id, platform, day, version) DO UPDATE SET installs = a.installs + excluded.installs
                        """,
                        """
                        INSERT INTO \(health) AS h (app_id, platform, version, day, os_major, version_key, installs, exited)
                        SELECT app_id, platform, version, day, os_major, version_key, installs, exited FROM \(cells)
                        ON CONFLICT (app_id, platform, version, day, os_major) DO UPDATE SET
                            installs = h.installs + excluded.installs, exited = h.exited + excluded.exited
                        """,
                    ]
                })
        }
        try await backfill.step("adoption_horizons", on: connection) { connection in
            try await connection.query(
                """
                INSERT INTO \(backfill.table("adoption_horizons")) (app_id, max_recorded_at)
                SELECT * FROM unnest(\(horizons.apps)::text[], \(horizons.maxima)::timestamptz[])
                """, logger: backfill.logger)
        }
        try await backfill.deadLetterInstallFacts(versions: versions, on: connection)
    }
}
