import Foundation
import PostgresNIO
import UpshiftCore

/// Release cohorts (time-to-update: docs/PROJECTIONS.md, "What the reports count"): the releases read
/// from the catalog events, each install's last event in the week before each release, when each install was
/// first seen on each version (`cohort_versions`), and from those, after every batch, each cohort install's T
/// and the figures the release report reads: the cohort size (`release_cohorts.cohort`) and the updated
/// installs per hour of T (`release_updates`).
///
/// Each `release_installs` row records what it adds to those figures (`counted_cohort`, `counted_hour`),
/// so that a refresh moves exactly that: a row whose cohort membership or T changes is taken out of the
/// figures as counted and put back as it is now.
public struct ReleaseCohortsProjection: ProjectionDefinition {
    public let name = "release_cohorts"
    /// 2: T kept per cohort install and the report's figures per release (it was a join at report time).
    public let version = 2
    public let tables = ["release_cohorts", "release_installs", "release_updates", "cohort_versions"]

    public init() {}

    public func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL] {
        [
            """
            CREATE TABLE \(t("release_cohorts")) (
                app_id      text        NOT NULL,
                platform    text        NOT NULL,
                version     text        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                released_at timestamptz NOT NULL,
                cohort      bigint      NOT NULL DEFAULT 0,  -- installs whose last event before R was below
                PRIMARY KEY (app_id, platform, version)
            )
            """,
            """
            CREATE TABLE \(t("release_installs")) (
                app_id         text        NOT NULL,
                platform       text        NOT NULL,
                version        text        NOT NULL,
                install_id     uuid        NOT NULL,
                last_before_at timestamptz NOT NULL,
                below          boolean     NOT NULL,
                -- The first time on a version >= the release, at or after it (from cohort_versions).
                reached_at     timestamptz,
                -- What this row adds to the release's figures: to the cohort, and to the hour of its T.
                counted_cohort boolean     NOT NULL DEFAULT false,
                counted_hour   integer,
                PRIMARY KEY (app_id, platform, version, install_id)
            )
            """,
            "CREATE INDEX \(t("release_installs").appending("_install")) ON \(t("release_installs")) (app_id, platform, install_id)",
            // The k-th T of a release within its hour (the report's median and p90).
            """
            CREATE INDEX \(t("release_installs").appending("_reached")) ON \(t("release_installs"))
                (app_id, platform, version, reached_at) WHERE counted_hour IS NOT NULL
            """,
            """
            CREATE TABLE \(t("release_updates")) (
                app_id   text    NOT NULL,
                platform text    NOT NULL,
                version  text    NOT NULL,
                hour     integer NOT NULL,  -- ⌈T / 1 h⌉ (ReleaseProgress.hour)
                installs bigint  NOT NULL,
                PRIMARY KEY (app_id, platform, version, hour)
            )
            """,
            FirstSeenVersionsTable.create(t("cohort_versions")),
        ]
    }

    /// ⌈T / 1 h⌉ of an install that reached the release at `reached`, T in whole milliseconds as the
    /// report states it (``ReleaseProgress``).
    static func hour(reached: SQL, releasedAt: SQL) -> SQL {
        "(((extract(epoch FROM (\(reached) - \(releasedAt))) * 1000)::int8 + 3599999) / 3600000)::int4"
    }

    public func batchLength(_ events: [ProjectionEvent]) -> Int { ReleaseCohortFold.batchLength(events) }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        var releases: [TrackedRelease.Key: TrackedRelease] = [:]
        let rows = try await connection.query(
            "SELECT app_id, platform, version, released_at FROM \(batch.table("release_cohorts"))",
            logger: batch.logger)
        for try await (app, platform, text, releasedAt) in rows.decode((AppID, Platform, String, Date).self) {
            guard let version = Version(text) else { continue }
            let release = TrackedRelease(appId: app, platform: platform, version: version, releasedAt: releasedAt)
            releases[release.key] = release
        }
        let output = ReleaseCohortFold.fold(events, releases: releases)
        batch.deadLetters += output.deadLetters
        try await FirstSeenVersionsTable.write(output.versions, into: batch.table("cohort_versions"), on: connection, batch: batch)
        try await write(output.candidates, in: batch, on: connection)
        if let (release, event) = output.changedRelease {
            try await reseed(release, before: event, in: batch, on: connection)
        }
        let touched = output.versions.installs
        guard !touched.isEmpty else { return }
        try await refresh(
            with: FirstSeenVersionsTable.touched(touched),
            where: "(ri.app_id, ri.platform, ri.install_id) IN (SELECT app_id, platform, install_id FROM touched)",
            in: batch, on: connection)
    }

    /// A release read for the first time, or with a new release time: its figures start again from the
    /// events before `event` in the feed.
    private func reseed(
        _ release: TrackedRelease, before event: ProjectionEvent, in batch: ProjectionBatch, on connection: StoreConnection
    ) async throws {
        let key = release.key
        try await connection.query(
            """
            INSERT INTO \(batch.table("release_cohorts")) AS r (app_id, platform, version, version_key, released_at)
            VALUES (\(key.appId), \(key.platform), \(key.version), \(release.version.sortKey), \(release.releasedAt.forPostgres))
            ON CONFLICT (app_id, platform, version) DO UPDATE SET released_at = excluded.released_at, cohort = 0
            """, logger: batch.logger)
        for table in ["release_installs", "release_updates"] {
            try await connection.query(
                """
                DELETE FROM \(batch.table(table))
                WHERE app_id = \(key.appId) AND platform = \(key.platform) AND version = \(key.version)
                """, logger: batch.logger)
        }
        // The window may already be in the log: seed from the events before this one in the feed.
        let window = try await connection.query(
            """
            SELECT install_id, occurred_at, app_version FROM event_log
            WHERE app_id = \(key.appId) AND platform = \(key.platform) AND install_id IS NOT NULL
              AND occurred_at >= \(release.windowStart.forPostgres) AND occurred_at < \(release.releasedAt.forPostgres)
              AND (tx_id, position) < (\(String(event.feedPosition.transaction))::text::xid8, \(event.feedPosition.position))
            ORDER BY occurred_at, tx_id, position
            """, logger: batch.logger)
        var windowEvents: [(installId: UUID, occurredAt: Date, appVersion: String?)] = []
        for try await row in window.decode((UUID, Date, String?).self) { windowEvents.append(row) }
        try await write(ReleaseCohortFold.seed(release, windowEvents: windowEvents), in: batch, on: connection)
        try await refresh(
            where: "ri.app_id = \(key.appId) AND ri.platform = \(key.platform) AND ri.version = \(key.version)",
            in: batch, on: connection)
    }

    private func write(
        _ candidates: [CohortMemberKey: CohortCandidate], in batch: ProjectionBatch, on connection: StoreConnection
    ) async throws {
        guard !candidates.isEmpty else { return }
        let keys = Array(candidates.keys)
        let values = keys.map { candidates[$0]! }
        try await connection.query(
            """
            INSERT INTO \(batch.table("release_installs")) AS r
                (app_id, platform, version, install_id, last_before_at, below)
            SELECT * FROM unnest(\(keys.map(\.release.appId))::text[], \(keys.map(\.release.platform))::text[],
                                 \(keys.map(\.release.version))::text[], \(keys.map(\.installId))::uuid[],
                                 \(values.map(\.lastBeforeAt.forPostgres))::timestamptz[], \(values.map(\.below))::boolean[])
            ON CONFLICT (app_id, platform, version, install_id) DO UPDATE SET
                last_before_at = excluded.last_before_at, below = excluded.below
                WHERE excluded.last_before_at >= r.last_before_at
            """, logger: batch.logger)
    }

    /// Brings the rows of `release_installs` that `condition` selects (alias `ri`; `with` adds CTEs it
    /// reads) up to date: each one's T from `cohort_versions`, and the release's figures by what each
    /// changed row counted before and counts now. Cells of `release_updates` that reach zero are deleted.
    private func refresh(with ctes: SQL? = nil, where condition: SQL, in batch: ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        let (installs, cohorts, updates) = (
            batch.table("release_installs"), batch.table("release_cohorts"), batch.table("release_updates")
        )
        let prefix: SQL = ctes.map { "\($0)," } ?? ""
        let cells = try await connection.query(
            """
            WITH \(prefix)
            -- The rows first, then their releases: left to itself, the planner may join the ten releases
            -- with the touched installs first and look each install up once per release (a batch of
            -- 3,000 installs took 1.3 s so, 0.6 s this way, and release_cohorts fell behind live load).
            hit AS MATERIALIZED (
                SELECT ri.* FROM \(installs) ri WHERE \(condition)
            ),
            target AS (
                SELECT ri.app_id, ri.platform, ri.version, ri.install_id, ri.below, ri.reached_at, ri.counted_cohort,
                       ri.counted_hour, rc.released_at,
                       (SELECT min(cv.first_at) FROM \(batch.table("cohort_versions")) cv
                        WHERE cv.app_id = ri.app_id AND cv.platform = ri.platform AND cv.install_id = ri.install_id
                          AND cv.version_key >= rc.version_key AND cv.first_at >= rc.released_at) AS reached
                FROM hit ri JOIN \(cohorts) rc USING (app_id, platform, version)
            ),
            changed AS (
                SELECT *, CASE WHEN below AND reached IS NOT NULL THEN \(Self.hour(reached: "reached", releasedAt: "released_at")) END AS hour
                FROM target
            ),
            moved AS (
                SELECT * FROM changed
                WHERE reached IS DISTINCT FROM reached_at OR below <> counted_cohort OR hour IS DISTINCT FROM counted_hour
            ),
            rows_updated AS (
                UPDATE \(installs) ri SET reached_at = m.reached, counted_cohort = m.below, counted_hour = m.hour
                FROM moved m
                WHERE ri.app_id = m.app_id AND ri.platform = m.platform AND ri.version = m.version AND ri.install_id = m.install_id
            ),
            cohorts_updated AS (
                UPDATE \(cohorts) rc SET cohort = rc.cohort + d.delta
                FROM (SELECT app_id, platform, version, sum(below::int - counted_cohort::int) AS delta FROM moved GROUP BY 1, 2, 3) d
                WHERE d.delta <> 0 AND rc.app_id = d.app_id AND rc.platform = d.platform AND rc.version = d.version
            )
            INSERT INTO \(updates) AS u (app_id, platform, version, hour, installs)
            SELECT app_id, platform, version, h, sum(delta)::int8 FROM (
                SELECT app_id, platform, version, counted_hour AS h, -1 AS delta FROM moved WHERE counted_hour IS NOT NULL
                UNION ALL
                SELECT app_id, platform, version, hour, 1 FROM moved WHERE hour IS NOT NULL
            ) AS m
            GROUP BY 1, 2, 3, 4 HAVING sum(delta) <> 0
            ON CONFLICT (app_id, platform, version, hour) DO UPDATE SET installs = u.installs + excluded.installs
            RETURNING u.app_id, u.platform, u.version, u.hour, u.installs
            """ as SQL, logger: batch.logger)
        var emptied: [(String, String, String, Int)] = []
        for try await (app, platform, version, hour, installs) in cells.decode((String, String, String, Int, Int).self)
        where installs == 0 {
            emptied.append((app, platform, version, hour))
        }
        guard !emptied.isEmpty else { return }
        try await connection.query(
            """
            DELETE FROM \(updates) u
            USING unnest(\(emptied.map(\.0))::text[], \(emptied.map(\.1))::text[], \(emptied.map(\.2))::text[],
                         \(emptied.map(\.3))::int4[]) AS z(app_id, platform, version, hour)
            WHERE u.app_id = z.app_id AND u.platform = z.platform AND u.version = z.version AND u.hour = z.hour
              AND u.installs = 0
            """, logger: batch.logger)
    }

    /// The installs leave every cohort: their first-seen versions go, their rows are refreshed as rows
    /// outside the cohort (so the figures lose what each counted), and then go too.
    public func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws {
        let versions = batch.table("cohort_versions")
        let cohortKeys = try await erased.keys(in: versions, on: connection, logger: batch.logger)
        try await connection.query(
            """
            DELETE FROM \(versions) v USING \(cohortKeys) AS k(app_id, platform, install_id)
            WHERE v.app_id = k.app_id AND v.platform = k.platform AND v.install_id = k.install_id
            """, logger: batch.logger)
        let keys = try await erased.keys(in: batch.table("release_installs"), on: connection, logger: batch.logger)
        let mine: SQL = "(ri.app_id, ri.platform, ri.install_id) IN (SELECT * FROM \(keys) AS k(app_id, platform, install_id))"
        try await connection.query(
            "UPDATE \(batch.table("release_installs")) ri SET below = false WHERE \(mine)", logger: batch.logger)
        try await refresh(where: mine, in: batch, on: connection)
        try await connection.query("DELETE FROM \(batch.table("release_installs")) ri WHERE \(mine)", logger: batch.logger)
    }

    public func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws {
        // The releases as the fold reads them from the catalog events (those kept from dropped months
        // first, as the feed reads them), and the first release of each app: the fold reads an app's
        // events (and dead-letters those it cannot read) only after it.
        let releaseKinds = [CatalogEvent.Kind.releaseAdded.rawValue, CatalogEvent.Kind.releaseUpdated.rawValue]
        let barriers = try await FeedReader.decode(
            connection.query(
                """
                SELECT \(FeedReader.columns) FROM (
                    SELECT \(FeedReader.rowColumns) FROM event_log e
                    WHERE \(backfill.included) AND e.install_id IS NULL AND e.type = ANY(\(releaseKinds)::text[])
                    UNION ALL
                    \(FeedReader.keptCatalogEvents) AND type = ANY(\(releaseKinds)::text[])
                ) AS e
                ORDER BY e.tx_id, e.position
                """ as SQL, logger: backfill.logger))
        var releases: [TrackedRelease.Key: TrackedRelease] = [:]
        var trackedFrom: [AppID: FeedPosition] = [:]
        var unreadable: [DeadLetter] = []
        for event in barriers {
            do {
                let release = try ReleaseCohortFold.release(in: event)
                if releases[release.key]?.releasedAt.microseconds != release.releasedAt.microseconds {
                    releases[release.key] = release
                }
                if trackedFrom[event.appId] == nil { trackedFrom[event.appId] = event.feedPosition }
            } catch {
                unreadable.append(DeadLetter(event: event, error: error.description))
            }
        }
        try await backfill.step("unreadable catalog events", on: connection) { [name] connection in
            try await ProjectionStore.storeDeadLetters(
                unreadable, projection: name, generation: backfill.generation, on: connection, logger: backfill.logger)
            backfill.progress.add(deadLetters: unreadable.count)
        }
        // Versions of every app's installs: a release added later finds them.
        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        try await FirstSeenVersionsTable.backfill(into: backfill.table("cohort_versions"), backfill, versions: versions, on: connection)
        guard !releases.isEmpty else { return }
        // In one order on every attempt: a restart skips the steps by their number.
        let tracked = releases.values.sorted {
            ($0.key.appId, $0.key.platform, $0.version.sortKey) < ($1.key.appId, $1.key.platform, $1.version.sortKey)
        }
        try await backfill.step("release_cohorts", on: connection) { connection in
            try await connection.query(
                """
                INSERT INTO \(backfill.table("release_cohorts")) (app_id, platform, version, version_key, released_at)
                SELECT * FROM unnest(\(tracked.map(\.key.appId))::text[], \(tracked.map(\.key.platform))::text[],
                                     \(tracked.map(\.key.version))::text[], \(tracked.map(\.version.sortKey))::text[],
                                     \(tracked.map(\.releasedAt.forPostgres))::timestamptz[])
                """, logger: backfill.logger)
        }
        // Each install's last event in the week before each release (ties: the later in the feed), with
        // its T from cohort_versions (a hashed join). One statement per release reads only the partitions
        // of its week.
        for release in tracked {
            let (key, releasedAt) = (release.key, release.releasedAt.forPostgres)
            try await backfill.chunkedInsert(
                "release_installs \(key.platform) \(key.version)", into: backfill.table("release_installs"),
                columns: [
                    "app_id", "platform", "version", "install_id", "last_before_at", "below", "reached_at", "counted_cohort",
                    "counted_hour",
                ],
                where: "app_id = \(key.appId) AND platform = \(key.platform) AND version = \(key.version)", on: connection
            ) { chunk in
                """
                WITH \(versions.cte),
                candidates AS (
                    SELECT DISTINCT ON (e.install_id) e.app_id, e.platform, e.install_id, e.occurred_at,
                           v.sort_key < \(release.version.sortKey) AS below
                    FROM event_log e JOIN versions v ON v.raw = e.app_version
                    WHERE \(backfill.included) AND e.app_id = \(key.appId) AND e.platform = \(key.platform)
                      AND e.install_id IS NOT NULL AND \(backfill.installs("e.install_id", in: chunk))
                      AND e.occurred_at >= \(release.windowStart.forPostgres) AND e.occurred_at < \(releasedAt)
                    ORDER BY e.install_id, e.occurred_at DESC, e.tx_id DESC, e.position DESC
                ),
                reached AS (
                    SELECT install_id, min(first_at) AS reached FROM \(backfill.table("cohort_versions"))
                    WHERE app_id = \(key.appId) AND platform = \(key.platform) AND version_key >= \(release.version.sortKey)
                      AND first_at >= \(releasedAt) AND \(backfill.installs("install_id", in: chunk))
                    GROUP BY install_id
                )
                SELECT c.app_id, c.platform, \(key.version), c.install_id, c.occurred_at, c.below, r.reached, c.below,
                       CASE WHEN c.below AND r.reached IS NOT NULL THEN \(Self.hour(reached: "r.reached", releasedAt: "\(releasedAt)")) END
                FROM candidates c LEFT JOIN reached r USING (install_id)
                ORDER BY c.install_id
                """
            }
        }
        try await backfill.step("release figures", on: connection) { connection in
            try await connection.query(
                """
                UPDATE \(backfill.table("release_cohorts")) rc SET cohort = c.cohort
                FROM (SELECT app_id, platform, version, count(*) AS cohort FROM \(backfill.table("release_installs"))
                      WHERE counted_cohort GROUP BY 1, 2, 3) c
                WHERE rc.app_id = c.app_id AND rc.platform = c.platform AND rc.version = c.version
                """ as SQL, logger: backfill.logger)
            try await connection.query(
                """
                INSERT INTO \(backfill.table("release_updates")) (app_id, platform, version, hour, installs)
                SELECT app_id, platform, version, counted_hour, count(*) FROM \(backfill.table("release_installs"))
                WHERE counted_hour IS NOT NULL GROUP BY 1, 2, 3, 4
                """ as SQL, logger: backfill.logger)
        }
        let apps = trackedFrom.keys.sorted()
        let firstRelease: SQL = """
            (e.tx_id, e.position) > (
                SELECT t.tx::xid8, t.pos
                FROM unnest(\(apps)::text[], \(apps.map { String(trackedFrom[$0]!.transaction) })::text[],
                            \(apps.map { trackedFrom[$0]!.position })::int8[]) AS t(app, tx, pos)
                WHERE t.app = e.app_id)
            """
        try await backfill.deadLetterInstallFacts(where: firstRelease, versions: versions, on: connection)
    }
}
