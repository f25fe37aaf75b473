import Foundation
import PostgresNIO
import UpshiftCore

/// Prompt funnels (docs/PROJECTIONS.md, "What the reports count"): per install, target version and
/// prompt kind, the first time the prompt was shown and whether it was dismissed (later / skip), acted on, or
/// blocked; when each install was first seen on each version (`prompt_versions`); and from those, after every
/// batch, whether each prompted install converted (and updated after starting the update), and the funnel the
/// report reads (`prompt_summary`, per target and kind); and every `updated` event by when it was recorded
/// (`prompt_updates`), from which the halt-on-prompts rule reads the share of starts left unfinished.
///
/// Each `prompt_installs` row records what it adds to its funnel (`counted`, one bit per step), so that
/// a refresh moves exactly that when a step or the conversion of the row changes.
public struct PromptFunnelProjection: ProjectionDefinition {
    public let name = "prompt_funnel"
    /// 3: when the first `update_started` was recorded, and the recorded `updated` events (the unfinished
    /// share). 2: conversion kept per install and the funnels per target (it was a join at report time).
    public let version = 3
    public let tables = ["prompt_installs", "prompt_summary", "prompt_versions", "prompt_updates"]

    public init() {}

    /// The steps of a funnel, as bits of `counted`, with the summary column each adds to.
    static let steps: [(bit: Int32, column: String)] = [
        (1, "shown"), (2, "dismissed_later"), (4, "dismissed_skip"), (8, "update_started"), (16, "blocked"),
        (32, "converted"), (64, "updated_after_start"),
    ]

    public func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL] {
        [
            """
            CREATE TABLE \(t("prompt_installs")) (
                app_id          text        NOT NULL,
                platform        text        NOT NULL,
                target_version  text        NOT NULL,
                target_key      text COLLATE "C" NOT NULL,
                kind            text        NOT NULL,
                install_id      uuid        NOT NULL,
                first_shown_at  timestamptz,
                dismissed_later boolean     NOT NULL,
                dismissed_skip  boolean     NOT NULL,
                update_started  boolean     NOT NULL,
                first_started_at timestamptz,
                first_started_recorded_at timestamptz,
                blocked         boolean     NOT NULL,
                counted         integer     NOT NULL DEFAULT 0,  -- the steps this row adds to its funnel (bits)
                PRIMARY KEY (app_id, platform, target_version, kind, install_id)
            )
            """,
            "CREATE INDEX \(t("prompt_installs").appending("_install")) ON \(t("prompt_installs")) (app_id, platform, install_id)",
            """
            CREATE TABLE \(t("prompt_summary")) (
                app_id          text   NOT NULL,
                platform        text   NOT NULL,
                target_version  text   NOT NULL,
                target_key      text COLLATE "C" NOT NULL,
                kind            text   NOT NULL,
                shown           bigint NOT NULL,
                dismissed_later bigint NOT NULL,
                dismissed_skip  bigint NOT NULL,
                update_started  bigint NOT NULL,
                blocked         bigint NOT NULL,
                converted       bigint NOT NULL,
                updated_after_start bigint NOT NULL,
                PRIMARY KEY (app_id, platform, target_version, kind)
            )
            """,
            FirstSeenVersionsTable.create(t("prompt_versions")),
            """
            CREATE TABLE \(t("prompt_updates")) (
                app_id      text        NOT NULL,
                platform    text        NOT NULL,
                install_id  uuid        NOT NULL,
                version_key text COLLATE "C" NOT NULL,
                recorded_at timestamptz NOT NULL,
                PRIMARY KEY (app_id, platform, install_id, recorded_at, version_key)
            )
            """,
        ]
    }

    /// The steps a row of `prompt_installs` (alias `p`) adds to its funnel now: its marks, and whether it
    /// was seen on a version ≥ the target within 7 days of its first `prompt_shown` (converted) and of its
    /// first `update_started` (updated after starting), from `versions`.
    static func steps(versions: SQLIdentifier) -> SQL {
        func reached(within start: SQL) -> SQL {
            """
            EXISTS (
                SELECT 1 FROM \(versions) pv
                WHERE pv.app_id = p.app_id AND pv.platform = p.platform AND pv.install_id = p.install_id
                  AND pv.version_key >= p.target_key AND pv.first_at >= \(start)
                  AND pv.first_at <= \(start) + make_interval(days => \(PromptFunnelReport.conversionDays)::int4))
            """
        }
        return """
            (CASE WHEN p.first_shown_at IS NOT NULL THEN 1 ELSE 0 END
             | CASE WHEN p.dismissed_later THEN 2 ELSE 0 END | CASE WHEN p.dismissed_skip THEN 4 ELSE 0 END
             | CASE WHEN p.update_started THEN 8 ELSE 0 END | CASE WHEN p.blocked THEN 16 ELSE 0 END
             | CASE WHEN \(reached(within: "p.first_shown_at")) THEN 32 ELSE 0 END
             | CASE WHEN \(reached(within: "p.first_started_at")) THEN 64 ELSE 0 END)
            """
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection)
        async throws
    {
        let output = PromptFunnelFold.fold(events)
        batch.deadLetters += output.deadLetters
        try await FirstSeenVersionsTable.write(output.versions, into: batch.table("prompt_versions"), on: connection, batch: batch)
        if !output.updates.isEmpty {
            let updates = Array(output.updates)
            try await connection.query(
                """
                INSERT INTO \(batch.table("prompt_updates")) (app_id, platform, install_id, version_key, recorded_at)
                SELECT * FROM unnest(\(updates.map(\.install.appId))::text[], \(updates.map(\.install.platform))::text[],
                                     \(updates.map(\.install.installId))::uuid[], \(updates.map(\.versionSortKey))::text[],
                                     \(updates.map(\.recordedAt.forPostgres))::timestamptz[])
                ON CONFLICT DO NOTHING
                """, logger: batch.logger)
        }
        if !output.marks.isEmpty {
            let keys = Array(output.marks.keys)
            let marks = keys.map { output.marks[$0]! }
            // No shown time travels as the epoch and is written as NULL (arrays of optionals do not bind).
            let never = Date(timeIntervalSince1970: 0)
            try await connection.query(
                """
                INSERT INTO \(batch.table("prompt_installs")) AS p
                    (app_id, platform, target_version, target_key, kind, install_id, first_shown_at, dismissed_later,
                     dismissed_skip, update_started, first_started_at, first_started_recorded_at, blocked)
                SELECT app_id, platform, target_version, target_key, kind, install_id,
                       NULLIF(first_shown_at, 'epoch'::timestamptz), dismissed_later, dismissed_skip, update_started,
                       NULLIF(first_started_at, 'epoch'::timestamptz), NULLIF(first_started_recorded_at, 'epoch'::timestamptz),
                       blocked
                FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.platform))::text[],
                            \(keys.map(\.targetVersion))::text[], \(marks.map(\.targetSortKey))::text[],
                            \(keys.map(\.kind.rawValue))::text[], \(keys.map(\.installId))::uuid[],
                            \(marks.map { ($0.firstShownAt ?? never).forPostgres })::timestamptz[], \(marks.map(\.dismissedLater))::boolean[],
                            \(marks.map(\.dismissedSkip))::boolean[], \(marks.map(\.updateStarted))::boolean[],
                            \(marks.map { ($0.firstStartedAt ?? never).forPostgres })::timestamptz[],
                            \(marks.map { ($0.firstStartedRecordedAt ?? never).forPostgres })::timestamptz[],
                            \(marks.map(\.blocked))::boolean[])
                     AS u(app_id, platform, target_version, target_key, kind, install_id, first_shown_at, dismissed_later,
                          dismissed_skip, update_started, first_started_at, first_started_recorded_at, blocked)
                ON CONFLICT (app_id, platform, target_version, kind, install_id) DO UPDATE SET
                    first_shown_at = LEAST(p.first_shown_at, excluded.first_shown_at),
                    dismissed_later = p.dismissed_later OR excluded.dismissed_later,
                    dismissed_skip = p.dismissed_skip OR excluded.dismissed_skip,
                    update_started = p.update_started OR excluded.update_started,
                    first_started_at = LEAST(p.first_started_at, excluded.first_started_at),
                    first_started_recorded_at = LEAST(p.first_started_recorded_at, excluded.first_started_recorded_at),
                    blocked = p.blocked OR excluded.blocked
                """, logger: batch.logger)
        }
        let touched = output.versions.installs
        guard !touched.isEmpty else { return }
        try await refresh(FirstSeenVersionsTable.touched(touched), in: batch, on: connection)
    }

    /// Brings the rows of the touched installs up to date: the steps each adds now, and the funnels by
    /// what each changed row counted before and counts now. Funnels that reach zero are deleted.
    private func refresh(_ touched: SQL, in batch: ProjectionBatch, on connection: StoreConnection) async throws {
        let (installs, summary) = (batch.table("prompt_installs"), batch.table("prompt_summary"))
        let deltas = SQL.joined(
            Self.steps.map { step in
                "sum(((now & \(step.bit)) <> 0)::int - ((counted & \(step.bit)) <> 0)::int)::int8"
            }, separator: ", ")
        let merged = SQL.joined(
            Self.steps.map { step in
                let column = SQLIdentifier(step.column)
                return "\(column) = s.\(column) + excluded.\(column)"
            }, separator: ", ")
        let total = SQL.joined(Self.steps.map { "s.\(SQLIdentifier($0.column))" }, separator: " + ")
        let funnels = try await connection.query(
            """
            WITH \(touched),
            target AS (
                SELECT p.app_id, p.platform, p.target_version, p.target_key, p.kind, p.install_id, p.counted,
                       \(Self.steps(versions: batch.table("prompt_versions"))) AS now
                FROM \(installs) p
                WHERE (p.app_id, p.platform, p.install_id) IN (SELECT app_id, platform, install_id FROM touched)
            ),
            moved AS (SELECT * FROM target WHERE now <> counted),
            rows_updated AS (
                UPDATE \(installs) p SET counted = m.now FROM moved m
                WHERE p.app_id = m.app_id AND p.platform = m.platform AND p.target_version = m.target_version
                  AND p.kind = m.kind AND p.install_id = m.install_id
            )
            INSERT INTO \(summary) AS s
                (app_id, platform, target_version, target_key, kind, shown, dismissed_later, dismissed_skip,
                 update_started, blocked, converted, updated_after_start)
            SELECT app_id, platform, target_version, min(target_key), kind, \(deltas)
            FROM moved GROUP BY app_id, platform, target_version, kind
            ON CONFLICT (app_id, platform, target_version, kind) DO UPDATE SET \(merged)
            RETURNING s.app_id, s.platform, s.target_version, s.kind, (\(total))::int8
            """ as SQL, logger: batch.logger)
        var emptied: [(String, String, String, String)] = []
        for try await (app, platform, target, kind, total) in funnels.decode((String, String, String, String, Int).self)
        where total == 0 {
            emptied.append((app, platform, target, kind))
        }
        guard !emptied.isEmpty else { return }
        try await connection.query(
            """
            DELETE FROM \(summary) s
            USING unnest(\(emptied.map(\.0))::text[], \(emptied.map(\.1))::text[], \(emptied.map(\.2))::text[],
                         \(emptied.map(\.3))::text[]) AS z(app_id, platform, target_version, kind)
            WHERE s.app_id = z.app_id AND s.platform = z.platform AND s.target_version = z.target_version
              AND s.kind = z.kind
              AND s.shown = 0 AND s.dismissed_later = 0 AND s.dismissed_skip = 0 AND s.update_started = 0
              AND s.blocked = 0 AND s.converted = 0 AND s.updated_after_start = 0
            """, logger: batch.logger)
    }

    /// The installs leave every funnel: their first-seen versions go, their rows are refreshed with no
    /// step taken (so each funnel loses what they counted), and then go too, with their recorded updates.
    public func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws {
        let installs = batch.table("prompt_installs")
        for table in ["prompt_versions", "prompt_updates"] {
            let keys = try await erased.keys(in: batch.table(table), on: connection, logger: batch.logger)
            try await connection.query(
                """
                DELETE FROM \(batch.table(table)) v USING \(keys) AS k(app_id, platform, install_id)
                WHERE v.app_id = k.app_id AND v.platform = k.platform AND v.install_id = k.install_id
                """, logger: batch.logger)
        }
        let keys = try await erased.keys(in: installs, on: connection, logger: batch.logger)
        try await connection.query(
            """
            UPDATE \(installs) p SET first_shown_at = NULL, dismissed_later = false, dismissed_skip = false,
                update_started = false, first_started_at = NULL, first_started_recorded_at = NULL, blocked = false
            FROM \(keys) AS k(app_id, platform, install_id)
            WHERE p.app_id = k.app_id AND p.platform = k.platform AND p.install_id = k.install_id
            """, logger: batch.logger)
        try await refresh("touched(app_id, platform, install_id) AS (SELECT * FROM \(keys) AS k(app_id, platform, install_id))", in: batch, on: connection)
        try await connection.query(
            """
            DELETE FROM \(installs) p USING \(keys) AS k(app_id, platform, install_id)
            WHERE p.app_id = k.app_id AND p.platform = k.platform AND p.install_id = k.install_id
            """, logger: batch.logger)
    }

    public func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws {
        let (shown, dismissed, started, blocked) = (
            EventType.promptShown.rawValue, EventType.promptDismissed.rawValue, EventType.updateStarted.rawValue,
            EventType.blocked.rawValue
        )
        let types: SQL = "e.type = ANY(\([shown, dismissed, started, blocked])::text[])"
        let kinds = PromptKind.allCases.map(\.rawValue)
        let actions = DismissAction.allCases.map(\.rawValue)
        // Every install event's version (conversion reads them all) and the prompts' targets.
        let versions = try await VersionSpellings.load(
            ["e.app_version", "e.data->>'targetVersion'"], where: "e.install_id IS NOT NULL", backfill: backfill,
            on: connection)
        try await FirstSeenVersionsTable.backfill(into: backfill.table("prompt_versions"), backfill, versions: versions, on: connection)
        // Every `updated` event with an install's facts, as the fold records it (equal rows are one).
        try await backfill.chunkedInsert(
            "prompt_updates", into: backfill.table("prompt_updates"),
            columns: ["app_id", "platform", "install_id", "version_key", "recorded_at"], on: connection
        ) { chunk in
            """
            WITH \(versions.cte)
            SELECT DISTINCT e.app_id, e.platform, e.install_id, v.sort_key, e.recorded_at
            FROM event_log e JOIN versions v ON v.raw = e.app_version
            WHERE \(backfill.included) AND e.type = \(EventType.updated.rawValue) AND e.install_id IS NOT NULL
              AND e.platform <> '' AND \(backfill.installs("e.install_id", in: chunk))
            ORDER BY e.install_id, e.app_id, e.platform, e.recorded_at, v.sort_key
            """
        }
        // The fold's checks in its order: the install facts, the target version, the kind, the dismiss action.
        let error: SQL = """
            coalesce(\(Backfill.installFactsError), CASE
                WHEN t.raw IS NULL THEN 'targetVersion ' || \(Backfill.quoted("e.data->>'targetVersion'")) || ' is not a version'
                WHEN e.type <> \(blocked) AND NOT coalesce(e.data->>'promptKind', '') = ANY(\(kinds)::text[])
                    THEN 'promptKind ' || \(Backfill.quoted("e.data->>'promptKind'")) || ' is not soft or force'
                WHEN e.type = \(dismissed) AND NOT coalesce(e.data->>'dismissAction', '') = ANY(\(actions)::text[])
                    THEN 'dismissAction ' || \(Backfill.quoted("e.data->>'dismissAction'")) || ' is not later or skip'
            END)
            """
        let source: SQL = """
            FROM event_log e LEFT JOIN versions v ON v.raw = e.app_version
            LEFT JOIN versions t ON t.raw = e.data->>'targetVersion'
            """
        try await backfill.chunkedInsert(
            "prompt_installs", into: backfill.table("prompt_installs"),
            columns: [
                "app_id", "platform", "target_version", "target_key", "kind", "install_id", "first_shown_at", "dismissed_later",
                "dismissed_skip", "update_started", "first_started_at", "first_started_recorded_at", "blocked", "counted",
            ], on: connection
        ) { chunk in
            """
            WITH \(versions.cte),
            marks AS (
                SELECT e.app_id, e.platform, t.normalized AS target, t.sort_key AS target_key,
                       CASE WHEN e.type = \(blocked) THEN \(PromptKind.force.rawValue) ELSE e.data->>'promptKind' END AS kind,
                       e.install_id, e.occurred_at, e.recorded_at, e.type, e.data->>'dismissAction' AS action
                \(source)
                WHERE \(backfill.included) AND \(types) AND \(backfill.installs("e.install_id", in: chunk))
                  AND (\(error)) IS NULL
            ),
            p AS (
                SELECT app_id, platform, target AS target_version, min(target_key) AS target_key, kind, install_id,
                       min(occurred_at) FILTER (WHERE type = \(shown)) AS first_shown_at,
                       bool_or(type = \(dismissed) AND action = \(DismissAction.later.rawValue)) AS dismissed_later,
                       bool_or(type = \(dismissed) AND action = \(DismissAction.skip.rawValue)) AS dismissed_skip,
                       bool_or(type = \(started)) AS update_started,
                       min(occurred_at) FILTER (WHERE type = \(started)) AS first_started_at,
                       min(recorded_at) FILTER (WHERE type = \(started)) AS first_started_recorded_at,
                       bool_or(type = \(blocked)) AS blocked
                FROM marks GROUP BY install_id, target, kind, app_id, platform
            )
            SELECT p.*, \(Self.steps(versions: backfill.table("prompt_versions"))) FROM p
            ORDER BY p.app_id, p.platform, p.target_version, p.kind, p.install_id
            """
        }
        let sums = SQL.joined(
            Self.steps.map { "count(*) FILTER (WHERE (counted & \($0.bit)) <> 0)" }, separator: ", ")
        try await backfill.step("prompt_summary", on: connection) { connection in
        try await connection.query(
            """
            INSERT INTO \(backfill.table("prompt_summary"))
                (app_id, platform, target_version, target_key, kind, shown, dismissed_later, dismissed_skip,
                 update_started, blocked, converted, updated_after_start)
            SELECT app_id, platform, target_version, min(target_key), kind, \(sums)
            FROM \(backfill.table("prompt_installs")) GROUP BY app_id, platform, target_version, kind
            """ as SQL, logger: backfill.logger)
        }
        try await backfill.deadLetter(error: error, from: source, where: types, versions: versions, on: connection)
    }
}
