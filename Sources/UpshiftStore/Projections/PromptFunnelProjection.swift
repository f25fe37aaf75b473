import Foundation
import PostgresNIO
import UpshiftCore

/// Prompt funnels (DESIGN.md section 6): per install, target version and prompt kind, the first time
/// the prompt was shown and whether it was dismissed (later / skip), acted on, or blocked. Conversion
/// is read at report time from `install_versions`.
public struct PromptFunnelProjection: ProjectionDefinition {
    public let name = "prompt_funnel"
    public let version = 1
    public let tables = ["prompt_installs"]

    public init() {}

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
                blocked         boolean     NOT NULL,
                PRIMARY KEY (app_id, platform, target_version, kind, install_id)
            )
            """
        ]
    }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: PostgresConnection)
        async throws
    {
        let output = PromptFunnelFold.fold(events)
        batch.deadLetters += output.deadLetters
        guard !output.marks.isEmpty else { return }
        let keys = Array(output.marks.keys)
        let marks = keys.map { output.marks[$0]! }
        // No shown time travels as the epoch and is written as NULL (arrays of optionals do not bind).
        let never = Date(timeIntervalSince1970: 0)
        try await connection.query(
            """
            INSERT INTO \(batch.table("prompt_installs")) AS p
                (app_id, platform, target_version, target_key, kind, install_id, first_shown_at, dismissed_later,
                 dismissed_skip, update_started, blocked)
            SELECT app_id, platform, target_version, target_key, kind, install_id,
                   NULLIF(first_shown_at, 'epoch'::timestamptz), dismissed_later, dismissed_skip, update_started, blocked
            FROM unnest(\(keys.map(\.appId))::text[], \(keys.map(\.platform))::text[],
                        \(keys.map(\.targetVersion))::text[], \(marks.map(\.targetSortKey))::text[],
                        \(keys.map(\.kind.rawValue))::text[], \(keys.map(\.installId))::uuid[],
                        \(marks.map { ($0.firstShownAt ?? never).forPostgres })::timestamptz[], \(marks.map(\.dismissedLater))::boolean[],
                        \(marks.map(\.dismissedSkip))::boolean[], \(marks.map(\.updateStarted))::boolean[],
                        \(marks.map(\.blocked))::boolean[])
                 AS u(app_id, platform, target_version, target_key, kind, install_id, first_shown_at, dismissed_later,
                      dismissed_skip, update_started, blocked)
            ON CONFLICT (app_id, platform, target_version, kind, install_id) DO UPDATE SET
                first_shown_at = LEAST(p.first_shown_at, excluded.first_shown_at),
                dismissed_later = p.dismissed_later OR excluded.dismissed_later,
                dismissed_skip = p.dismissed_skip OR excluded.dismissed_skip,
                update_started = p.update_started OR excluded.update_started,
                blocked = p.blocked OR excluded.blocked
            """, logger: batch.logger)
    }

    public func backfill(_ backfill: inout Backfill, on connection: PostgresConnection) async throws {
        let (shown, dismissed, started, blocked) = (
            EventType.promptShown.rawValue, EventType.promptDismissed.rawValue, EventType.updateStarted.rawValue,
            EventType.blocked.rawValue
        )
        let types: SQL = "e.type = ANY(\([shown, dismissed, started, blocked])::text[])"
        let kinds = PromptKind.allCases.map(\.rawValue)
        let actions = DismissAction.allCases.map(\.rawValue)
        let versions = try await VersionSpellings.load(
            ["e.app_version", "e.data->>'targetVersion'"], where: types, backfill: backfill, on: connection)
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
        try await connection.query(
            """
            WITH \(versions.cte),
            marks AS (
                SELECT e.app_id, e.platform, t.normalized AS target, t.sort_key AS target_key,
                       CASE WHEN e.type = \(blocked) THEN \(PromptKind.force.rawValue) ELSE e.data->>'promptKind' END AS kind,
                       e.install_id, e.occurred_at, e.type, e.data->>'dismissAction' AS action
                \(source)
                WHERE \(backfill.included) AND \(types) AND (\(error)) IS NULL
            )
            INSERT INTO \(backfill.table("prompt_installs"))
                (app_id, platform, target_version, target_key, kind, install_id, first_shown_at, dismissed_later,
                 dismissed_skip, update_started, blocked)
            SELECT app_id, platform, target, min(target_key), kind, install_id,
                   min(occurred_at) FILTER (WHERE type = \(shown)),
                   bool_or(type = \(dismissed) AND action = \(DismissAction.later.rawValue)),
                   bool_or(type = \(dismissed) AND action = \(DismissAction.skip.rawValue)),
                   bool_or(type = \(started)), bool_or(type = \(blocked))
            FROM marks GROUP BY install_id, target, kind, app_id, platform
            """ as SQL, logger: backfill.logger)
        try await backfill.deadLetter(error: error, from: source, where: types, versions: versions, on: connection)
    }
}
