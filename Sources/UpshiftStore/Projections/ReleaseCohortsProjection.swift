import Foundation
import PostgresNIO
import UpshiftCore

/// Release cohorts (DESIGN.md section 6, time-to-update): the releases read from the catalog events,
/// and each install's last event in the week before each release. T is read at report time from
/// `install_versions`.
public struct ReleaseCohortsProjection: ProjectionDefinition {
    public let name = "release_cohorts"
    public let version = 1
    public let tables = ["release_cohorts", "release_installs"]

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
                PRIMARY KEY (app_id, platform, version, install_id)
            )
            """,
        ]
    }

    public func batchLength(_ events: [ProjectionEvent]) -> Int { ReleaseCohortFold.batchLength(events) }

    public func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: PostgresConnection)
        async throws
    {
        var releases: [TrackedRelease.Key: TrackedRelease] = [:]
        let rows = try await connection.query(
            "SELECT app_id, platform, version, released_at FROM \(batch.table("release_cohorts"))",
            logger: batch.logger)
        for try await (app, platform, text, releasedAt) in rows.decode((String, String, String, Date).self) {
            guard let version = Version(text) else { continue }
            let release = TrackedRelease(appId: app, platform: platform, version: version, releasedAt: releasedAt)
            releases[release.key] = release
        }
        let output = ReleaseCohortFold.fold(events, releases: releases)
        batch.deadLetters += output.deadLetters
        try await write(output.candidates, in: batch, on: connection)
        guard let (release, event) = output.changedRelease else { return }
        let key = release.key
        try await connection.query(
            """
            INSERT INTO \(batch.table("release_cohorts")) AS r (app_id, platform, version, version_key, released_at)
            VALUES (\(key.appId), \(key.platform), \(key.version), \(release.version.sortKey), \(release.releasedAt.forPostgres))
            ON CONFLICT (app_id, platform, version) DO UPDATE SET released_at = excluded.released_at
            """, logger: batch.logger)
        try await connection.query(
            """
            DELETE FROM \(batch.table("release_installs"))
            WHERE app_id = \(key.appId) AND platform = \(key.platform) AND version = \(key.version)
            """, logger: batch.logger)
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
    }

    private func write(
        _ candidates: [CohortMemberKey: CohortCandidate], in batch: ProjectionBatch, on connection: PostgresConnection
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

    public func backfill(_ backfill: inout Backfill, on connection: PostgresConnection) async throws {
        // The releases as the fold reads them from the catalog events, and the first release of each
        // app: the fold reads an app's events (and dead-letters those it cannot read) only after it.
        let releaseKinds = [CatalogEvent.Kind.releaseAdded.rawValue, CatalogEvent.Kind.releaseUpdated.rawValue]
        let barriers = try await FeedReader.decode(
            connection.query(
                """
                SELECT \(FeedReader.columns) FROM event_log e
                WHERE \(backfill.included) AND e.install_id IS NULL AND e.type = ANY(\(releaseKinds)::text[])
                ORDER BY e.tx_id, e.position
                """ as SQL, logger: backfill.logger))
        var releases: [TrackedRelease.Key: TrackedRelease] = [:]
        var trackedFrom: [String: FeedPosition] = [:]
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
        try await ProjectionStore.storeDeadLetters(
            unreadable, projection: name, generation: backfill.generation, on: connection, logger: backfill.logger)
        backfill.deadLetters += unreadable.count
        guard !releases.isEmpty else { return }

        let versions = try await VersionSpellings.load(
            ["e.app_version"], where: "e.install_id IS NOT NULL", backfill: backfill, on: connection)
        let tracked = Array(releases.values)
        try await connection.query(
            """
            INSERT INTO \(backfill.table("release_cohorts")) (app_id, platform, version, version_key, released_at)
            SELECT * FROM unnest(\(tracked.map(\.key.appId))::text[], \(tracked.map(\.key.platform))::text[],
                                 \(tracked.map(\.key.version))::text[], \(tracked.map(\.version.sortKey))::text[],
                                 \(tracked.map(\.releasedAt.forPostgres))::timestamptz[])
            """, logger: backfill.logger)
        // Each install's last event in the week before each release (ties: the later in the feed). One
        // statement per release reads only the partitions of its week.
        for release in tracked {
            try await connection.query(
                """
                WITH \(versions.cte)
                INSERT INTO \(backfill.table("release_installs"))
                    (app_id, platform, version, install_id, last_before_at, below)
                SELECT DISTINCT ON (e.install_id) e.app_id, e.platform, \(release.key.version), e.install_id, e.occurred_at,
                       v.sort_key < \(release.version.sortKey)
                FROM event_log e JOIN versions v ON v.raw = e.app_version
                WHERE \(backfill.included) AND e.app_id = \(release.key.appId) AND e.platform = \(release.key.platform)
                  AND e.install_id IS NOT NULL
                  AND e.occurred_at >= \(release.windowStart.forPostgres) AND e.occurred_at < \(release.releasedAt.forPostgres)
                ORDER BY e.install_id, e.occurred_at DESC, e.tx_id DESC, e.position DESC
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
