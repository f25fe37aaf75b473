import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// Why a catalog write was refused; the API maps each to its status (404, 409, 412, 400).
public enum CatalogError: Error, Equatable, CustomStringConvertible {
    case appNotFound(String)
    case releaseNotFound(String)
    case ruleNotFound(String)
    case appExists(String)
    case releaseExists(String)
    /// The `If-Match` revision is not the current one.
    case stale(current: Int)
    case invalid(FieldError)

    public var description: String {
        switch self {
        case .appNotFound(let id): "no app \(id)"
        case .releaseNotFound(let what): "no release \(what)"
        case .ruleNotFound(let what): "no rule \(what)"
        case .appExists(let id): "app \(id) already exists"
        case .releaseExists(let what): "release \(what) already exists"
        case .stale(let current): "the revision is stale: the current one is \(current)"
        case .invalid(let error): error.description
        }
    }
}

/// A catalog write's result: the value written and its revision, and warnings for the operator.
public struct CatalogWrite<Value: Sendable>: Sendable {
    public var value: Value
    public var revision: Int
    public var warnings: [String]

    public init(value: Value, revision: Int, warnings: [String]) {
        self.value = value
        self.revision = revision
        self.warnings = warnings
    }
}

/// One entry of an app's history (`GET /v1/apps/{app}/history`).
public struct CatalogHistoryEntry: Sendable, Codable, Equatable {
    public var version: Int
    public var type: String
    public var at: Date
    public var actor: String
    public var reason: String?
    public var platform: Platform?
    public var releaseVersion: String?
    /// The rule a `rule_replaced` or `rule_removed` event wrote.
    public var rule: String?
    public var changes: [String: CatalogEvent.FieldChange]
    /// On the rollout worker's writes: the step applied, the steps skipped, a pause ended.
    public var schedule: CatalogEvent.ScheduleNote?
    /// Set when the stored event could not be read (an unknown type, or data this version cannot decode):
    /// why. The entry then carries its stream version, type and time only, and `actor` is `unknown`.
    public var undecodable: String?
}

extension CatalogHistoryEntry {
    init(_ event: CatalogEvent, version: Int, at: Date) {
        self.init(
            version: version, type: event.kind.rawValue, at: at, actor: event.actor, reason: event.reason,
            platform: event.platform ?? event.release?.platform ?? event.rule?.platform,
            releaseVersion: event.release?.version.text, rule: event.rule?.id, changes: event.changes, schedule: event.schedule,
            undecodable: nil)
    }
}

/// What a webhook of a catalog kind delivers (docs/openapi.yaml, `webhooks:`): the history entry of the
/// write, and the release or policy as it stands after it.
struct CatalogWebhookBody: Encodable {
    let kind: String
    let app: String
    let entry: CatalogHistoryEntry
    let release: Release?
    let policy: Policy?
}

/// The catalog: apps, releases and policies as events on `app:{id}` streams plus current tables,
/// written together in one transaction with optimistic concurrency (docs/ARCHITECTURE.md, "One transaction
/// per write").
public struct CatalogStore: Sendable {
    /// The channel every catalog write notifies, with the app id as payload.
    public static let notifyChannel = "upshift_catalog"

    let pool: DatabasePool
    let logger: Logger

    public init(client: PostgresClient, logger: Logger) {
        self.init(pool: DatabasePool(client: client, logger: logger), logger: logger)
    }

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    // MARK: Reads

    /// The catalog as read: every app whose rows all decode, and the apps left out because one did not.
    public struct Load: Sendable {
        public var apps: [AppID: AppCatalog]
        /// App id → what could not be decoded (a row written by an older, laxer server, or by hand).
        public var undecodable: [AppID: String]
    }

    /// An app whose stored rows cannot be decoded.
    public struct UndecodableApp: Error, CustomStringConvertible {
        public var appId: AppID
        public var reason: String
        public var description: String { "the stored catalog of app \(appId) cannot be read: \(reason)" }
    }

    /// The whole catalog, or one app's. A row that does not decode leaves its app out (listed in
    /// ``Load/undecodable``) instead of failing the load: one bad row must never take every app's catalog
    /// down with it.
    public func loadAll(appId: AppID? = nil) async throws -> Load {
        try await load(only: appId.map { [$0] })
    }

    /// The catalogs of the apps `only` names (every app when nil): what the check snapshot reloads after
    /// a write, the apps whose stream heads moved (``heads()``).
    public func load(only ids: [AppID]?) async throws -> Load {
        let decoder = CatalogCoding.decoder()
        var catalogs: [AppID: AppCatalog] = [:]
        var undecodable: [AppID: String] = [:]
        for (appId, app) in try await appRows(only: ids) {
            switch app {
            case .success(let app): catalogs[appId] = AppCatalog(app: app)
            case .failure(let error): undecodable[appId] = "app: \(error)"
            }
        }
        let releases = try await pool.query(
            "SELECT app_id, platform, version_key, release::text, revision FROM releases WHERE \(ids)::text[] IS NULL OR app_id = ANY(\(ids))",
            logger: logger)
        for try await (appId, platform, version, json, revision) in releases.decode((AppID, String, String, String, Int).self) {
            do {
                var release = try decoder.decode(Release.self, from: Data(json.utf8))
                release.revision = revision
                catalogs[appId]?.upsert(release)
            } catch {
                undecodable[appId] = undecodable[appId] ?? "release \(platform) \(version): \(error)"
            }
        }
        let policies = try await pool.query(
            "SELECT app_id, platform, policy::text, revision FROM policies WHERE \(ids)::text[] IS NULL OR app_id = ANY(\(ids))",
            logger: logger)
        // The platform is read as text: a row that breaks the rule makes its app undecodable, not the load.
        for try await (appId, platform, json, revision) in policies.decode((AppID, String, String, Int).self) {
            do {
                var policy = try decoder.decode(Policy.self, from: Data(json.utf8))
                policy.revision = revision
                catalogs[appId]?.policies[try Platform(platform)] = policy
            } catch {
                undecodable[appId] = undecodable[appId] ?? "policy \(platform): \(error)"
            }
        }
        let rules = try await pool.query(
            "SELECT app_id, platform, rule_id, rule::text, revision FROM rules WHERE \(ids)::text[] IS NULL OR app_id = ANY(\(ids))",
            logger: logger)
        for try await (appId, platform, id, json, revision) in rules.decode((AppID, String, String, String, Int).self) {
            // A rule that cannot be read is left out and logged, its app kept: rules change no check answer.
            do {
                var rule = try decoder.decode(Rule.self, from: Data(json.utf8))
                rule.revision = revision
                catalogs[appId]?.upsert(rule)
            } catch {
                logger.error(
                    "rule undecodable; left out", metadata: ["app": "\(appId)", "platform": "\(platform)", "rule": "\(id)", "error": "\(error)"])
            }
        }
        // Half an app is worse than none: without its policy or a blocked release it would answer wrongly.
        for appId in undecodable.keys { catalogs[appId] = nil }
        return Load(apps: catalogs, undecodable: undecodable)
    }

    /// Each app's stream head: the version of its last catalog event. A write moves its app's head only,
    /// so comparing heads tells which apps to reload. Read before the rows a reload reads (a row newer
    /// than its head is read again at the next move; a head newer than its rows would never be).
    public func heads() async throws -> [AppID: Int64] {
        let rows = try await pool.query(
            "SELECT substr(stream_id, 5), version FROM streams WHERE stream_id LIKE 'app:%'", logger: logger)
        var heads: [AppID: Int64] = [:]
        // Read as text: a stream whose name is no app id names no app to load, and fails no other head.
        for try await (app, version) in rows.decode((String, Int64).self) {
            if let app = AppID(validating: app) { heads[app] = version }
        }
        return heads
    }

    /// A number that grows with every catalog write (the sum of the stream heads), for polling.
    public func version() async throws -> Int64 {
        let rows = try await pool.query("SELECT coalesce(sum(version), 0)::bigint FROM streams", logger: logger)
        for try await value in rows.decode(Int64.self) { return value }
        return 0
    }

    public func apps(id: AppID? = nil) async throws -> [AppInfo] {
        try await apps(only: id.map { [$0] })
    }

    /// The apps `only` names, every app when nil.
    public func apps(only ids: [AppID]?) async throws -> [AppInfo] {
        try await appRows(only: ids).map { try $0.1.get() }
    }

    /// Each `apps` row by id, read or the error its row gave.
    private func appRows(only ids: [AppID]?) async throws -> [(AppID, Result<AppInfo, any Error>)] {
        let rows = try await pool.query(
            """
            SELECT app_id, name, default_locale, update_urls::text, store_ids::text, bundle_ids::text, revision FROM apps
            WHERE \(ids)::text[] IS NULL OR app_id = ANY(\(ids)) ORDER BY app_id
            """, logger: logger)
        var apps: [(AppID, Result<AppInfo, any Error>)] = []
        for try await row in rows.decode((AppID, String, String, String, String, String, Int).self) {
            apps.append((row.0, Result { try Self.app(row) }))
        }
        return apps
    }

    public func app(id: AppID) async throws -> AppCatalog? {
        let load = try await loadAll(appId: id)
        if let reason = load.undecodable[id] { throw UndecodableApp(appId: id, reason: reason) }
        return load.apps[id]
    }

    /// The app's catalog changes, newest first; `before` pages back by stream version.
    public func history(appId: AppID, before: Int?, limit: Int) async throws -> [CatalogHistoryEntry] {
        let rows = try await pool.query(
            """
            SELECT stream_version, type, occurred_at, data::text FROM catalog_events
            WHERE stream_id = \("app:\(appId)") AND (\(before)::bigint IS NULL OR stream_version < \(before))
            ORDER BY stream_version DESC LIMIT \(limit)
            """, logger: logger)
        var entries: [CatalogHistoryEntry] = []
        for try await (version, type, at, data) in rows.decode((Int, String, Date, String).self) {
            // An event this version cannot read (written by a newer one, or damaged) is listed as such: a
            // history that answers 500 would hide every other change.
            let event: CatalogEvent
            do {
                guard let kind = CatalogEvent.Kind(rawValue: type) else { throw UndecodableEvent(reason: "unknown event type") }
                event = try CatalogEvent.decode(kind: kind, data: Data(data.utf8))
            } catch {
                let reason = (error as? UndecodableEvent)?.reason ?? "its data does not decode as \(type)"
                logger.error(
                    "catalog event undecodable",
                    metadata: ["app": "\(appId)", "streamVersion": "\(version)", "type": "\(type)", "error": "\(error)"])
                entries.append(
                    CatalogHistoryEntry(
                        version: version, type: type, at: at, actor: "unknown", reason: nil, platform: nil, releaseVersion: nil,
                        rule: nil, changes: [:], schedule: nil, undecodable: reason))
                continue
            }
            entries.append(CatalogHistoryEntry(event, version: version, at: at))
        }
        return entries
    }

    /// Every catalog event of an app, oldest first (rebuilds and audits).
    public func events(appId: AppID) async throws -> [CatalogEvent] {
        let rows = try await pool.query(
            "SELECT type, data::text FROM catalog_events WHERE stream_id = \("app:\(appId)") ORDER BY stream_version",
            logger: logger)
        var events: [CatalogEvent] = []
        for try await (type, data) in rows.decode((String, String).self) {
            guard let kind = CatalogEvent.Kind(rawValue: type) else { continue }
            events.append(try CatalogEvent.decode(kind: kind, data: Data(data.utf8)))
        }
        return events
    }

    /// Every catalog event of an app with the time it was written, oldest first (what the rules read to
    /// know a release's states and who last wrote a field). Events this version cannot read are left out.
    public func timeline(appId: AppID) async throws -> [(at: Date, event: CatalogEvent)] {
        let rows = try await pool.query(
            "SELECT type, occurred_at, data::text FROM catalog_events WHERE stream_id = \("app:\(appId)") ORDER BY stream_version",
            logger: logger)
        var events: [(at: Date, event: CatalogEvent)] = []
        for try await (type, at, data) in rows.decode((String, Date, String).self) {
            guard let kind = CatalogEvent.Kind(rawValue: type),
                let event = try? CatalogEvent.decode(kind: kind, data: Data(data.utf8))
            else { continue }
            events.append((at, event))
        }
        return events
    }

    /// Listens for catalog writes on a connection of its own: `onListening` once the LISTEN is in
    /// place, `onChange` with the app id of every write. Returns or throws when the connection ends.
    public static func listen(
        settings: DatabaseSettings, logger: Logger,
        onListening: @Sendable () async -> Void, onChange: @Sendable (String) async -> Void
    ) async throws {
        let connection = try await PostgresConnection.connect(
            configuration: try settings.connectionConfiguration(applicationName: "upshift-listener"), id: 0, logger: logger)
        // Cancelling (a graceful shutdown) closes the connection, which ends the notifications.
        try await withTaskCancellationHandler {
            do {
                try await connection.listen(on: notifyChannel) { notifications in
                    await onListening()
                    for try await notification in notifications {
                        await onChange(notification.payload)
                    }
                }
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        } onCancel: {
            connection.close().whenComplete { _ in }
        }
    }

    // MARK: Writes

    /// Creates an app: stream head at 1, the `app_created` event and the `apps` row.
    public func createApp(_ app: AppInfo, actor: String, reason: String?, now: Date) async throws -> AppInfo {
        let event = CatalogEvent(
            kind: .appCreated, actor: actor, reason: reason, app: app,
            changes: try CatalogEvent.changes(from: AppInfo?.none, to: app))
        let stream = "app:\(app.id)"
        let urls = try CatalogCoding.json(app.updateURL)
        let stores = try CatalogCoding.json(app.storeId)
        let bundles = try CatalogCoding.json(app.bundleId)
        try await pool.transaction(logger: logger) { connection in
            let head = try await connection.query(
                "INSERT INTO streams (stream_id, version) VALUES (\(stream), 1) ON CONFLICT DO NOTHING RETURNING version",
                logger: logger)
            var created = false
            for try await _ in head { created = true }
            guard created else { throw CatalogError.appExists(app.id.rawValue) }
            try await connection.query(
                """
                INSERT INTO apps (app_id, name, default_locale, update_urls, store_ids, bundle_ids, created_at)
                VALUES (\(app.id), \(app.name), \(app.defaultLocale), \(urls)::jsonb, \(stores)::jsonb, \(bundles)::jsonb, \(now))
                """, logger: logger)
            try await record(event, appId: app.id, streamVersion: 1, now: now, on: connection)
        }
        return app
    }

    /// An `apps` row: id, name, default locale, the three platform maps as JSON text, revision.
    static func app(_ row: (AppID, String, String, String, String, String, Int)) throws -> AppInfo {
        let decoder = JSONDecoder()
        return AppInfo(
            id: row.0, name: row.1, defaultLocale: row.2,
            updateURL: try decoder.decode([Platform: String].self, from: Data(row.3.utf8)),
            storeId: try decoder.decode([Platform: String].self, from: Data(row.4.utf8)),
            bundleId: try decoder.decode([Platform: String].self, from: Data(row.5.utf8)), revision: row.6)
    }

    /// Edits an app with optimistic concurrency (`expectedRevision` must be the current one): an
    /// `app_updated` event with the whole app after the edit, its changes, actor and reason. Warnings say
    /// which releases leave the feeds when a page goes (``AppInfo/pageWarnings(from:releases:)``).
    public func updateApp(
        appId: AppID, expectedRevision: Int, actor: String, reason: String?, now: Date,
        edit: @escaping @Sendable (AppInfo) throws -> AppInfo
    ) async throws -> CatalogWrite<AppInfo> {
        try await write(appId: appId, now: now) { connection, streamVersion in
            let rows = try await connection.query(
                """
                SELECT app_id, name, default_locale, update_urls::text, store_ids::text, bundle_ids::text, revision
                FROM apps WHERE app_id = \(appId)
                """, logger: logger)
            var current: AppInfo?
            for try await row in rows.decode((AppID, String, String, String, String, String, Int).self) {
                current = try Self.app(row)
            }
            guard let old = current else { throw CatalogError.appNotFound(appId.rawValue) }
            guard old.revision == expectedRevision else { throw CatalogError.stale(current: old.revision) }
            var updated = try edit(old)
            updated.id = old.id
            let changes = try CatalogEvent.changes(from: old, to: updated)
            guard !changes.isEmpty else { return CatalogWrite(value: old, revision: old.revision, warnings: []) }
            updated.revision = old.revision + 1
            try await connection.query(
                """
                UPDATE apps SET name = \(updated.name), default_locale = \(updated.defaultLocale),
                    update_urls = \(try CatalogCoding.json(updated.updateURL))::jsonb,
                    store_ids = \(try CatalogCoding.json(updated.storeId))::jsonb,
                    bundle_ids = \(try CatalogCoding.json(updated.bundleId))::jsonb, revision = \(updated.revision)
                WHERE app_id = \(appId)
                """, logger: logger)
            let event = CatalogEvent(kind: .appUpdated, actor: actor, reason: reason, app: updated, changes: changes)
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
            let releases = try await connection.query(
                "SELECT release::text FROM releases WHERE app_id = \(appId)", logger: logger)
            var all: [Release] = []
            for try await json in releases.decode(String.self) {
                all.append(try CatalogCoding.decoder().decode(Release.self, from: Data(json.utf8)))
            }
            return CatalogWrite(value: updated, revision: updated.revision, warnings: updated.pageWarnings(from: old, releases: all))
        }
    }

    /// Adds a release; `409` when one of equal version exists on the platform.
    public func addRelease(appId: AppID, _ release: Release, actor: String, reason: String?, now: Date) async throws
        -> CatalogWrite<Release>
    {
        var release = release
        release.revision = 1
        release.rolloutHistory = nil
        release.recordRollout(at: now, previous: nil)
        let written = release
        return try await write(appId: appId, now: now) { connection, streamVersion in
            let json = try CatalogCoding.json(written)
            let inserted = try await connection.query(
                """
                INSERT INTO releases (app_id, platform, version_key, release, revision)
                VALUES (\(appId), \(written.platform), \(written.version.canonical), \(json)::jsonb, 1)
                ON CONFLICT DO NOTHING RETURNING revision
                """, logger: logger)
            var created = false
            for try await _ in inserted { created = true }
            guard created else { throw CatalogError.releaseExists("\(written.platform) \(written.version)") }
            let event = CatalogEvent(
                kind: .releaseAdded, actor: actor, reason: reason, release: written,
                changes: try CatalogEvent.changes(from: Release?.none, to: written))
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
            return CatalogWrite(
                value: written, revision: 1,
                warnings: try await appcastWarnings(written, appId: appId, on: connection))
        }
    }

    /// Edits a release with optimistic concurrency: `expectedRevision` must be the current one. A rule's
    /// action passes its `ruleRecord`, appended in the same transaction when the write changes anything.
    public func updateRelease(
        appId: AppID, platform: Platform, version: Version, expectedRevision: Int, actor: String, reason: String?,
        now: Date, schedule: CatalogEvent.ScheduleNote? = nil, ruleRecord: RuleRecord? = nil,
        edit: @escaping @Sendable (Release) throws -> Release
    ) async throws -> CatalogWrite<Release> {
        try await write(appId: appId, now: now) { connection, streamVersion in
            let rows = try await connection.query(
                """
                SELECT release::text, revision FROM releases
                WHERE app_id = \(appId) AND platform = \(platform) AND version_key = \(version.canonical)
                """, logger: logger)
            var current: (Release, Int)?
            for try await (json, revision) in rows.decode((String, Int).self) {
                var release = try CatalogCoding.decoder().decode(Release.self, from: Data(json.utf8))
                release.revision = revision
                current = (release, revision)
            }
            guard let (old, revision) = current else { throw CatalogError.releaseNotFound("\(platform) \(version)") }
            guard revision == expectedRevision else { throw CatalogError.stale(current: revision) }
            var updated = try edit(old)
            let changes = try CatalogEvent.changes(from: old, to: updated)
            // A write that changes nothing leaves the revision, the history and the instances alone.
            guard !changes.isEmpty else { return CatalogWrite(value: old, revision: revision, warnings: []) }
            updated.rolloutHistory = old.rolloutHistory
            updated.recordRollout(at: now, previous: old)
            updated.revision = revision + 1
            try await connection.query(
                """
                UPDATE releases SET release = \(try CatalogCoding.json(updated))::jsonb, revision = \(revision + 1)
                WHERE app_id = \(appId) AND platform = \(platform) AND version_key = \(version.canonical)
                """, logger: logger)
            // A schedule that moved with its release says so in the history.
            var note = schedule
            if note == nil, let moved = updated.rolloutSchedule, let before = old.rolloutSchedule,
                moved.startsAt != before.startsAt, updated.releasedAt != old.releasedAt
            {
                note = CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: false, reanchoredAt: moved.startsAt)
            }
            let event = CatalogEvent(
                kind: .releaseUpdated, actor: actor, reason: reason, release: updated, changes: changes, schedule: note)
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
            if let ruleRecord { try await RuleRecordStore.append(ruleRecord, appId: appId, on: connection, logger: logger) }
            return CatalogWrite(
                value: updated, revision: revision + 1,
                warnings: try await appcastWarnings(updated, appId: appId, on: connection))
        }
    }

    /// Replaces a policy with optimistic concurrency (revision 0: never set); `ruleRecord` as for a release.
    public func replacePolicy(
        appId: AppID, platform: Platform, _ policy: Policy, expectedRevision: Int, actor: String, reason: String?,
        now: Date, ruleRecord: RuleRecord? = nil
    ) async throws -> CatalogWrite<Policy> {
        try await write(appId: appId, now: now) { connection, streamVersion in
            let rows = try await connection.query(
                "SELECT policy::text, revision FROM policies WHERE app_id = \(appId) AND platform = \(platform)",
                logger: logger)
            var old: Policy?
            var revision = 0
            for try await (json, current) in rows.decode((String, Int).self) {
                old = try CatalogCoding.decoder().decode(Policy.self, from: Data(json.utf8))
                revision = current
            }
            guard revision == expectedRevision else { throw CatalogError.stale(current: revision) }
            var updated = policy
            let changes = try CatalogEvent.changes(from: old ?? Policy(), to: updated)
            guard !changes.isEmpty else {  // nothing changes: as for releases
                updated.revision = revision
                return CatalogWrite(
                    value: updated, revision: revision,
                    warnings: try await policyWarnings(updated, appId: appId, platform: platform, on: connection))
            }
            updated.revision = revision + 1
            try await connection.query(
                """
                INSERT INTO policies (app_id, platform, policy, revision)
                VALUES (\(appId), \(platform), \(try CatalogCoding.json(updated))::jsonb, \(revision + 1))
                ON CONFLICT (app_id, platform) DO UPDATE SET policy = excluded.policy, revision = excluded.revision
                """, logger: logger)
            let event = CatalogEvent(
                kind: .policyReplaced, actor: actor, reason: reason, platform: platform, policy: updated, changes: changes)
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
            if let ruleRecord { try await RuleRecordStore.append(ruleRecord, appId: appId, on: connection, logger: logger) }
            return CatalogWrite(
                value: updated, revision: revision + 1,
                warnings: try await policyWarnings(updated, appId: appId, platform: platform, on: connection))
        }
    }

    /// Writes a rule with optimistic concurrency (revision 0: a new rule), at most
    /// ``RuleDefinition/maximumPerPlatform`` per app and platform.
    public func replaceRule(
        appId: AppID, platform: Platform, id: String, _ definition: RuleDefinition, expectedRevision: Int, actor: String,
        reason: String?, now: Date
    ) async throws -> CatalogWrite<Rule> {
        try await write(appId: appId, now: now) { connection, streamVersion in
            let old = try await rule(appId: appId, platform: platform, id: id, on: connection)
            let revision = old?.revision ?? 0
            guard revision == expectedRevision else { throw CatalogError.stale(current: revision) }
            if old == nil {
                let counted = try await connection.query(
                    "SELECT count(*)::int FROM rules WHERE app_id = \(appId) AND platform = \(platform)", logger: logger)
                for try await count in counted.decode(Int.self) where count >= RuleDefinition.maximumPerPlatform {
                    throw CatalogError.invalid(
                        FieldError("rule", "at most \(RuleDefinition.maximumPerPlatform) rules per app and platform", kind: .inconsistent))
                }
            }
            // A write that changes nothing leaves everything as it was, as for policies; one that changes
            // anything is a new writing of the rule, from which it acts again on a release a person overrode.
            if let old, old.definition == definition { return CatalogWrite(value: old, revision: revision, warnings: []) }
            let updated = Rule(id: id, platform: platform, definition: definition, revision: revision + 1, writtenAt: now)
            try await connection.query(
                """
                INSERT INTO rules (app_id, platform, rule_id, rule, revision)
                VALUES (\(appId), \(platform), \(id), \(try CatalogCoding.json(updated))::jsonb, \(updated.revision))
                ON CONFLICT (app_id, platform, rule_id) DO UPDATE SET rule = excluded.rule, revision = excluded.revision
                """, logger: logger)
            let event = CatalogEvent(
                kind: .ruleReplaced, actor: actor, reason: reason, platform: platform, rule: updated,
                changes: try CatalogEvent.changes(from: old, to: updated).filter { $0.key != "writtenAt" })
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
            return CatalogWrite(value: updated, revision: updated.revision, warnings: [])
        }
    }

    /// Removes a rule with optimistic concurrency: `rule_removed`, carrying the rule as it was.
    public func removeRule(
        appId: AppID, platform: Platform, id: String, expectedRevision: Int, actor: String, reason: String?, now: Date
    ) async throws {
        try await write(appId: appId, now: now) { connection, streamVersion in
            guard let old = try await rule(appId: appId, platform: platform, id: id, on: connection) else {
                throw CatalogError.ruleNotFound("\(platform) \(id)")
            }
            guard old.revision == expectedRevision else { throw CatalogError.stale(current: old.revision) }
            try await connection.query(
                "DELETE FROM rules WHERE app_id = \(appId) AND platform = \(platform) AND rule_id = \(id)", logger: logger)
            let event = CatalogEvent(kind: .ruleRemoved, actor: actor, reason: reason, platform: platform, rule: old)
            try await record(event, appId: appId, streamVersion: streamVersion, now: now, on: connection)
        }
    }

    private func rule(appId: AppID, platform: Platform, id: String, on connection: StoreConnection) async throws -> Rule? {
        let rows = try await connection.query(
            "SELECT rule::text, revision FROM rules WHERE app_id = \(appId) AND platform = \(platform) AND rule_id = \(id)",
            logger: logger)
        for try await (json, revision) in rows.decode((String, Int).self) {
            var rule = try CatalogCoding.decoder().decode(Rule.self, from: Data(json.utf8))
            rule.revision = revision
            return rule
        }
        return nil
    }

    /// A minimum above every live release blocks everyone below it with nothing to update to.
    private func policyWarnings(_ policy: Policy, appId: AppID, platform: Platform, on connection: StoreConnection)
        async throws -> [String]
    {
        guard policy.minimumVersion != nil else { return [] }
        return policy.warnings(among: try await releases(appId: appId, platform: platform, on: connection), platform: platform)
    }

    /// The platform's releases as stored, inside a write's transaction.
    /// What the operator must hear about `release` for the appcast (``Release/appcastWarnings(among:appPageURL:)``).
    private func appcastWarnings(_ release: Release, appId: AppID, on connection: StoreConnection) async throws
        -> [String]
    {
        guard release.platform == "macos" else { return [] }
        let rows = try await connection.query(
            "SELECT update_urls->>\(release.platform) FROM apps WHERE app_id = \(appId)", logger: logger)
        var page: String?
        for try await url in rows.decode(String?.self) { page = url }
        return release.appcastWarnings(
            among: try await releases(appId: appId, platform: release.platform, on: connection), appPageURL: page)
    }

    private func releases(appId: AppID, platform: Platform, on connection: StoreConnection) async throws -> [Release] {
        let rows = try await connection.query(
            "SELECT release::text FROM releases WHERE app_id = \(appId) AND platform = \(platform)", logger: logger)
        var releases: [Release] = []
        for try await json in rows.decode(String.self) {
            releases.append(try CatalogCoding.decoder().decode(Release.self, from: Data(json.utf8)))
        }
        return releases
    }

    /// Runs one catalog write: locks the app's stream head (which serializes writers of the app) and
    /// lets `body` check revisions and write with the stream version its event gets. A body that records
    /// no event (nothing changed) leaves the stream, and everything else, as it was.
    private func write<T: Sendable>(
        appId: AppID, now: Date,
        _ body: @escaping @Sendable (StoreConnection, Int) async throws -> T
    ) async throws -> T {
        try await pool.transaction(logger: logger) { connection in
            let head = try await connection.query(
                "SELECT version FROM streams WHERE stream_id = \("app:\(appId)") FOR UPDATE", logger: logger)
            var version: Int?
            for try await value in head.decode(Int.self) { version = value }
            guard let version else { throw CatalogError.appNotFound(appId.rawValue) }
            return try await body(connection, version + 1)
        }
    }

    /// Appends a catalog event at `streamVersion`, moves the stream head there, and notifies the instances
    /// once committed.
    private func record(_ event: CatalogEvent, appId: AppID, streamVersion: Int, now: Date, on connection: StoreConnection)
        async throws
    {
        try await connection.query(
            "UPDATE streams SET version = \(streamVersion) WHERE stream_id = \("app:\(appId)")", logger: logger)
        try await connection.query("SELECT upshift_ensure_event_partitions(\(now), \(now))", logger: logger)
        try await connection.query(
            """
            INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, stream_id, stream_version, data)
            VALUES (\(UUID()), \(now), \(now), \(appId), \(event.kind.rawValue), \("app:\(appId)"), \(streamVersion),
                    \(try CatalogCoding.json(event))::jsonb)
            """, logger: logger)
        for kind in WebhookKind.of(event) {
            let body = CatalogWebhookBody(
                kind: kind.rawValue, app: appId.rawValue, entry: CatalogHistoryEntry(event, version: streamVersion, at: now),
                release: event.release, policy: event.policy)
            try await WebhookStore.enqueue(kind, body: try CatalogCoding.json(body), app: appId, now: now, on: connection, logger: logger)
        }
        try await connection.query("SELECT pg_notify(\(Self.notifyChannel), \(appId))", logger: logger)
    }
}

private struct UndecodableEvent: Error {
    let reason: String
}
