import Foundation
import PostgresNIO
import UpshiftCore

/// Release health cohorts (docs/PROJECTIONS.md, "What the reports count"): `health_versions`, each
/// install's first event on each version (its time and OS major) and its first abnormal exit of it, and
/// `health_cohorts`, the installs per version, OS major and first day with how many exited within 72 hours:
/// the cells the guarded health test reads. (Daily health figures are adoption's: `health_daily`.)
public struct ReleaseHealthProjection: ProjectionDefinition {
    public let name = "release_health"
    public let version = 1
    public let tables = ["health_versions", "health_cohorts"]

    public init() {}

    public func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL] {
        [
            """
            CREATE TABLE \(t("health_versions")) (
                app_id      text        NOT NULL,
                platform    text        NOT NULL,
                install_id  uuid        NOT NULL,
                version     text        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                first_at    timestamptz NOT NULL,  -- the install's first event on the version
                os_major    text        NOT NULL,  -- of that event
                exit_at     timestamptz,           -- its first abnormal_exit of the version
                PRIMARY KEY (app_id, platform, install_id, version)
            )
            """,
            """
            CREATE TABLE \(t("health_cohorts")) (
                app_id      text    NOT NULL,
                platform    text    NOT NULL,
                version     text    NOT NULL,
                os_major    text    NOT NULL,
                day         date    NOT NULL,  -- of first_at
                version_key text COLLATE "C" NOT NULL,
                installs    integer NOT NULL,
                exited      integer NOT NULL,  -- exit_at < first_at + 72 h
                PRIMARY KEY (app_id, platform, version, os_major, day)
            )
            """,
        ]
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        let versionKeys = Array(HealthCohortFold.versionKeys(for: events))
        var storedVersions: [InstallVersionKey: InstallVersion] = [:]
        if !versionKeys.isEmpty {
            let rows = try await connection.query(
                """
                SELECT v.app_id, v.platform, v.install_id, v.version, v.version_key, v.first_at, v.os_major, v.exit_at
                FROM unnest(\(versionKeys.map(\.appId))::text[], \(versionKeys.map(\.platform))::text[],
                            \(versionKeys.map(\.installId))::uuid[], \(versionKeys.map(\.version))::text[])
                     AS k(app_id, platform, install_id, version)
                JOIN \(batch.table("health_versions")) v USING (app_id, platform, install_id, version)
                """, logger: batch.logger)
            for try await row in rows.decode((AppID, Platform, UUID, String, String, Date, String, Date?).self) {
                storedVersions[InstallVersionKey(appId: row.0, platform: row.1, installId: row.2, version: row.3)] =
                    InstallVersion(versionSortKey: row.4, firstAt: row.5, osMajor: row.6, exitAt: row.7)
            }
        }
        let output = HealthCohortFold.fold(events, stored: storedVersions)
        batch.deadLetters += output.deadLetters
        if !output.versions.isEmpty {
            let keys = Array(output.versions.keys)
            let rows = keys.map { output.versions[$0]! }
            try await connection.query(
                """
                INSERT INTO \(batch.table("health_versions")) AS v
                    (app_id, platform, install_id, version, version_key, first_at, os_major, exit_at)
                SELECT app_id, platform, install_id, version, version_key, first_at, os_major,
                       CASE WHEN exited THEN exit_at END
                FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.platform))::text[],
                            \(keys.map(\.installId))::uuid[], \(keys.map(\.version))::text[],
                            \(rows.map(\.versionSortKey))::text[], \(rows.map(\.firstAt.forPostgres))::timestamptz[],
                            \(rows.map(\.osMajor))::text[], \(rows.map { $0.exitAt != nil })::bool[],
                            \(rows.map { ($0.exitAt ?? $0.firstAt).forPostgres })::timestamptz[])
                     AS u(app_id, platform, install_id, version, version_key, first_at, os_major, exited, exit_at)
                ON CONFLICT (app_id, platform, install_id, version) DO UPDATE SET
                    first_at = excluded.first_at, os_major = excluded.os_major, exit_at = excluded.exit_at
                """, logger: batch.logger)
        }
        if !output.cohorts.isEmpty {
            let cells = Array(output.cohorts.keys)
            let counts = cells.map { output.cohorts[$0]! }
            let table = batch.table("health_cohorts")
            try await connection.query(
                """
                INSERT INTO \(table) AS h (app_id, platform, version, os_major, day, version_key, installs, exited)
                SELECT app_id, platform, version, os_major, day::date, version_key, installs, exited
                FROM unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                            \(cells.map(\.version))::text[], \(cells.map(\.osMajor))::text[],
                            \(cells.map(\.day.description))::text[], \(cells.map { output.versionSortKeys[$0.version] ?? "" })::text[],
                            \(counts.map(\.installs))::int8[], \(counts.map(\.exited))::int8[])
                     AS u(app_id, platform, version, os_major, day, version_key, installs, exited)
                ON CONFLICT (app_id, platform, version, os_major, day) DO UPDATE SET
                    installs = h.installs + excluded.installs, exited = h.exited + excluded.exited
                """, logger: batch.logger)
            try await connection.query(
                """
                DELETE FROM \(table) h
                USING unnest(\(cells.map(\.appId))::text[], \(cells.map(\.platform))::text[],
                             \(cells.map(\.version))::text[], \(cells.map(\.osMajor))::text[],
                             \(cells.map(\.day.description))::text[])
                      AS u(app_id, platform, version, os_major, day)
                WHERE h.installs = 0 AND h.app_id = u.app_id AND h.platform = u.platform AND h.version = u.version
                  AND h.os_major = u.os_major AND h.day = u.day::date
                """, logger: batch.logger)
        }
    }

    /// The installs' first events on each version go, and each cohort cell loses them (and their exits).
    public func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws {
        let (versions, cohorts) = (batch.table("health_versions"), batch.table("health_cohorts"))
        let keys = try await erased.keys(in: versions, on: connection, logger: batch.logger)
        try await connection.query(
            """
            WITH gone AS (
                DELETE FROM \(versions) v USING \(keys) AS k(app_id, platform, install_id)
                WHERE v.app_id = k.app_id AND v.platform = k.platform AND v.install_id = k.install_id
                RETURNING v.app_id, v.platform, v.version, v.os_major, (v.first_at AT TIME ZONE 'UTC')::date AS day,
                          coalesce(v.exit_at < v.first_at + make_interval(secs => \(HealthCohort.exitWindow)), false) AS exited
            )
            UPDATE \(cohorts) h SET installs = h.installs - m.installs, exited = h.exited - m.exited
            FROM (SELECT app_id, platform, version, os_major, day, count(*)::int4 AS installs,
                         count(*) FILTER (WHERE exited)::int4 AS exited
                  FROM gone GROUP BY 1, 2, 3, 4, 5) m
            WHERE h.app_id = m.app_id AND h.platform = m.platform AND h.version = m.version AND h.os_major = m.os_major
              AND h.day = m.day
            """, logger: batch.logger)
        // As in a batch: a cell back at zero leaves no row.
        try await connection.query(
            """
            DELETE FROM \(cohorts) h
            WHERE h.installs = 0 AND h.app_id = ANY(\(Array(Set(erased.installs.map(\.appId))))::text[])
            """, logger: batch.logger)
    }

    public func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws {
        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        // Each install's first event on each version and its first abnormal exit of it (no day closes
        // for them), then the cohorts summed from those rows.
        let healthVersions = backfill.table("health_versions")
        try await backfill.chunkedInsert(
            healthVersions.name, into: healthVersions,
            columns: ["app_id", "platform", "install_id", "version", "version_key", "first_at", "os_major", "exit_at"],
            on: connection
        ) { chunk in
            """
            WITH \(versions.cte)
            SELECT e.app_id, e.platform, e.install_id, v.normalized, min(v.sort_key), min(e.occurred_at),
                   \(AdoptionProjection.osMajor("(array_agg(e.data->>'osVersion' ORDER BY e.occurred_at, e.tx_id, e.position))[1]")),
                   min(e.occurred_at) FILTER (WHERE e.type = \(EventType.abnormalExit.rawValue))
            FROM event_log e JOIN versions v ON v.raw = e.app_version
            WHERE \(backfill.included) AND e.install_id IS NOT NULL AND e.platform <> ''
              AND \(backfill.installs("e.install_id", in: chunk))
            GROUP BY e.install_id, e.app_id, e.platform, v.normalized
            ORDER BY e.install_id, e.app_id, e.platform, v.normalized
            """
        }
        try await backfill.step("health_cohorts", on: connection) { connection in
            try await connection.query(
                """
                INSERT INTO \(backfill.table("health_cohorts"))
                    (app_id, platform, version, os_major, day, version_key, installs, exited)
                SELECT app_id, platform, version, os_major, (first_at AT TIME ZONE 'UTC')::date, min(version_key), count(*),
                       count(*) FILTER (WHERE exit_at < first_at + interval '72 hours')
                FROM \(healthVersions) GROUP BY 1, 2, 3, 4, 5
                """, logger: backfill.logger)
        }
        try await backfill.deadLetterInstallFacts(versions: versions, on: connection)
    }
}
