import Foundation
import PostgresNIO
import UpshiftCore

/// A table of when each install was first seen on each version (``FirstSeenVersions``), as the release
/// cohorts keep it for T (`cohort_versions`) and the prompt funnel for conversion (`prompt_versions`):
/// each projection keeps its own, so that what it derives from it is a function of its own feed prefix.
enum FirstSeenVersionsTable {
    static func create(_ table: SQLIdentifier) -> SQL {
        """
        CREATE TABLE \(table) (
            app_id      text        NOT NULL,
            platform    text        NOT NULL,
            install_id  uuid        NOT NULL,
            version     text        NOT NULL,
            version_key text COLLATE "C" NOT NULL,
            first_at    timestamptz NOT NULL,
            PRIMARY KEY (app_id, platform, install_id, version)
        )
        """
    }

    /// Merges a batch's rows: the earlier time wins. Rows that would not change are left out before the
    /// upsert: `ON CONFLICT DO UPDATE` locks every conflicting row, even one its `WHERE` leaves alone,
    /// and a lock dirties the row's page (a full page in the WAL after each checkpoint) for every event.
    static func write(_ versions: FirstSeenVersions, into table: SQLIdentifier, on connection: StoreConnection, batch: ProjectionBatch)
        async throws
    {
        let rows = Array(versions.rows.values)
        guard !rows.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO \(table) AS v (app_id, platform, install_id, version, version_key, first_at)
            SELECT * FROM unnest(\(rows.map(\.key.appId))::text[], \(rows.map(\.key.platform))::text[],
                                 \(rows.map(\.key.installId))::uuid[], \(rows.map(\.key.version))::text[],
                                 \(rows.map(\.versionSortKey))::text[], \(rows.map(\.firstAt.forPostgres))::timestamptz[])
                 AS u(app_id, platform, install_id, version, version_key, first_at)
            WHERE NOT EXISTS (
                SELECT 1 FROM \(table) s
                WHERE s.app_id = u.app_id AND s.platform = u.platform AND s.install_id = u.install_id
                  AND s.version = u.version AND s.first_at <= u.first_at)
            ON CONFLICT (app_id, platform, install_id, version) DO UPDATE SET first_at = excluded.first_at
                WHERE excluded.first_at < v.first_at
            """, logger: batch.logger)
    }

    /// `installs(app_id, platform, install_id)` for a statement's `WITH`: the installs a batch touched.
    static func touched(_ installs: Set<PlatformInstall>) -> SQL {
        let list = Array(installs)
        return """
            touched(app_id, platform, install_id) AS (
                SELECT * FROM unnest(\(list.map(\.appId))::text[], \(list.map(\.platform))::text[], \(list.map(\.installId))::uuid[]))
            """
    }

    /// Fills the table from every install event of the backfill with a valid version (`versions`), an
    /// install range per step, sorted by install first: a sort led by a key that rarely differs (the
    /// app) falls through to the next key on every comparison, three times slower (41 s against 15 s
    /// for 10 M events). For one app that is also the order of the table's key, and an index filled in
    /// order is written several times faster than one filled at random.
    static func backfill(into table: SQLIdentifier, _ backfill: Backfill, versions: VersionSpellings, on connection: StoreConnection)
        async throws
    {
        try await backfill.chunkedInsert(
            table.name, into: table, columns: ["app_id", "platform", "install_id", "version", "version_key", "first_at"],
            on: connection
        ) { chunk in
                """
                WITH \(versions.cte)
                SELECT e.app_id, e.platform, e.install_id, v.normalized, min(v.sort_key), min(e.occurred_at)
                FROM event_log e JOIN versions v ON v.raw = e.app_version
                WHERE \(backfill.included) AND e.install_id IS NOT NULL AND e.platform <> ''
                  AND \(backfill.installs("e.install_id", in: chunk))
                GROUP BY e.install_id, e.app_id, e.platform, v.normalized
                ORDER BY e.install_id, e.app_id, e.platform, v.normalized
                """
        }
    }
}
