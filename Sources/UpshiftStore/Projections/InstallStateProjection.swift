import Foundation
import PostgresNIO
import UpshiftCore

/// `install_state` (DESIGN.md section 6) and `install_versions` (when each install was first seen on
/// each version, which time-to-update and prompt conversion read).
public struct InstallStateProjection: ProjectionDefinition {
    public let name = "install_state"
    public let version = 1
    public let tables = ["install_state", "install_versions"]

    public init() {}

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
                PRIMARY KEY (app_id, install_id)
            )
            """,
            "CREATE INDEX \(t("install_state").appending("_recent")) ON \(t("install_state")) (app_id, platform, last_seen)",
            """
            CREATE TABLE \(t("install_versions")) (
                app_id      text        NOT NULL,
                platform    text        NOT NULL,
                install_id  uuid        NOT NULL,
                version     text        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                first_at    timestamptz NOT NULL,
                PRIMARY KEY (app_id, platform, install_id, version)
            )
            """,
        ]
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: PostgresConnection)
        async throws
    {
        let output = InstallStateFold.fold(events)
        batch.deadLetters += output.deadLetters
        if !output.states.isEmpty {
            let rows = output.states
            try await connection.query(
                """
                INSERT INTO \(batch.table("install_state")) AS s
                    (app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale)
                SELECT app_id, install_id, platform, first_seen, last_seen, version, version_key,
                       NULLIF(os_version, ''), NULLIF(locale, '')
                FROM unnest(\(rows.map(\.key.appId))::text[], \(rows.map(\.key.installId))::uuid[],
                            \(rows.map(\.platform))::text[], \(rows.map(\.firstSeen.forPostgres))::timestamptz[],
                            \(rows.map(\.lastSeen.forPostgres))::timestamptz[], \(rows.map(\.version))::text[],
                            \(rows.map(\.versionSortKey))::text[], \(rows.map { $0.osVersion ?? "" })::text[],
                            \(rows.map { $0.locale ?? "" })::text[])
                     AS u(app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale)
                ON CONFLICT (app_id, install_id) DO UPDATE SET
                    first_seen = LEAST(s.first_seen, excluded.first_seen),
                    last_seen = GREATEST(s.last_seen, excluded.last_seen),
                    platform = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.platform ELSE s.platform END,
                    version = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.version ELSE s.version END,
                    version_key = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.version_key ELSE s.version_key END,
                    os_version = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.os_version ELSE s.os_version END,
                    locale = CASE WHEN excluded.last_seen >= s.last_seen THEN excluded.locale ELSE s.locale END
                """, logger: batch.logger)
        }
        if !output.versions.isEmpty {
            let rows = output.versions
            try await connection.query(
                """
                INSERT INTO \(batch.table("install_versions")) AS v
                    (app_id, platform, install_id, version, version_key, first_at)
                SELECT * FROM unnest(\(rows.map(\.key.appId))::text[], \(rows.map(\.key.platform))::text[],
                                     \(rows.map(\.key.installId))::uuid[], \(rows.map(\.key.version))::text[],
                                     \(rows.map(\.versionSortKey))::text[], \(rows.map(\.firstAt.forPostgres))::timestamptz[])
                ON CONFLICT (app_id, platform, install_id, version) DO UPDATE SET first_at = excluded.first_at
                    WHERE excluded.first_at < v.first_at
                """, logger: batch.logger)
        }
    }

    public func backfill(_ backfill: inout Backfill, on connection: PostgresConnection) async throws {
        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        let counted: SQL = """
            FROM event_log e JOIN versions v ON v.raw = e.app_version
            WHERE \(backfill.included) AND e.install_id IS NOT NULL AND e.platform <> ''
            """
        // The latest event of each install (ties: the later in the feed), and the earliest time. Sorts and
        // groups lead with the install: a leading key that rarely differs (the app) makes every
        // comparison fall through to the next key, three times slower.
        try await connection.query(
            """
            WITH \(versions.cte)
            INSERT INTO \(backfill.table("install_state"))
                (app_id, install_id, platform, first_seen, last_seen, version, version_key, os_version, locale)
            SELECT DISTINCT ON (e.install_id, e.app_id)
                   e.app_id, e.install_id, e.platform, min(e.occurred_at) OVER install, e.occurred_at, v.normalized,
                   v.sort_key, NULLIF(e.data->>'osVersion', ''), NULLIF(e.data->>'locale', '')
            \(counted)
            WINDOW install AS (
                PARTITION BY e.install_id, e.app_id ORDER BY e.occurred_at DESC, e.tx_id DESC, e.position DESC
                ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)
            ORDER BY e.install_id, e.app_id, e.occurred_at DESC, e.tx_id DESC, e.position DESC
            """ as SQL, logger: backfill.logger)
        try await connection.query(
            """
            WITH \(versions.cte)
            INSERT INTO \(backfill.table("install_versions")) (app_id, platform, install_id, version, version_key, first_at)
            SELECT e.app_id, e.platform, e.install_id, v.normalized, min(v.sort_key), min(e.occurred_at)
            \(counted)
            GROUP BY e.install_id, e.app_id, e.platform, v.normalized
            """ as SQL, logger: backfill.logger)
        try await backfill.deadLetterInstallFacts(versions: versions, on: connection)
    }
}
