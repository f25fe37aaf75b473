import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A webhook subscription as the API shows it: never its secret.
public struct Webhook: Sendable, Equatable {
    public var appId: AppID
    public var id: UUID
    public var url: String
    public var kinds: [WebhookKind]
    public var format: WebhookFormat
    /// The adoption shares, in percent, whose crossing `adoption.crossed` tells.
    public var thresholds: [Double]
    public var enabled: Bool
    public var disabledReason: String?
    public var failingSince: Date?
    /// Until when deliveries are signed with the secret before the last rotation too.
    public var previousSecretUntil: Date?
    public var createdAt: Date
}

/// One delivery of a subscription and its attempts, newest attempt last.
public struct WebhookDelivery: Sendable, Equatable {
    public struct Attempt: Sendable, Equatable {
        public var attempt: Int
        public var at: Date
        public var durationMilliseconds: Int
        public var status: Int?
        public var error: String?
    }

    public var id: UUID
    public var kind: String
    public var state: String
    public var createdAt: Date
    public var nextAt: Date?
    public var attempts: [Attempt]
}

/// Webhook subscriptions and their outbox (docs/OPERATIONS.md, "Webhooks").
public struct WebhookStore: Sendable {
    /// Subscriptions an app may have.
    public static let perApp = 20
    /// How long a rotated-out secret still signs.
    public static let rotationGrace: TimeInterval = 24 * 3_600
    /// How long a delivery that ended, and its attempts, are kept.
    public static let kept: TimeInterval = 30 * 86_400

    public enum Failure: Error, Equatable {
        case tooMany
        case notFound
    }

    /// A delivery due, with what sending it needs.
    public struct Due: Sendable {
        public var appId: AppID
        public var id: UUID
        public var webhookId: UUID
        public var url: String
        public var format: WebhookFormat
        public var body: String
        public var attempts: Int
        public var createdAt: Date
        /// The current secret first, then the previous one while it still signs.
        public var secrets: [String]
    }

    let pool: DatabasePool
    let logger: Logger

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    static let columns: SQL = """
        app_id, id, url, kinds, format, enabled, disabled_reason, failing_since, previous_until, created_at, thresholds
        """

    typealias Row = (AppID, UUID, String, [String], String, Bool, String?, Date?, Date?, Date, [Double])

    static func webhook(_ row: Row) -> Webhook {
        Webhook(
            appId: row.0, id: row.1, url: row.2, kinds: row.3.compactMap(WebhookKind.init(rawValue:)),
            format: WebhookFormat(rawValue: row.4) ?? .json, thresholds: row.10, enabled: row.5, disabledReason: row.6,
            failingSince: row.7, previousSecretUntil: row.8, createdAt: row.9)
    }

    /// Creates a subscription; returns it with its secret, which is never shown again.
    public func create(
        app: AppID, url: String, kinds: [WebhookKind], format: WebhookFormat = .json, thresholds: [Double] = [], now: Date
    ) async throws
        -> (Webhook, secret: String)
    {
        let secret = WebhookSignature.newSecret()
        let id = UUID()
        try await pool.transaction(logger: logger) { [logger] connection in
            // The app's row serializes its creations, so the limit holds under concurrent requests.
            var exists = false
            for try await _ in try await connection.query(
                "SELECT 1 FROM apps WHERE app_id = \(app) FOR UPDATE", logger: logger
            ).decode(Int.self) { exists = true }
            guard exists else { throw CatalogError.appNotFound(app.rawValue) }
            for try await count in try await connection.query(
                "SELECT count(*)::int8 FROM webhooks WHERE app_id = \(app)", logger: logger
            ).decode(Int.self) where count >= Self.perApp { throw Failure.tooMany }
            try await connection.query(
                """
                INSERT INTO webhooks (app_id, id, url, kinds, format, thresholds, secret, created_at)
                VALUES (\(app), \(id), \(url), \(kinds.map(\.rawValue))::text[], \(format.rawValue), \(thresholds)::float8[],
                        \(secret), \(now))
                """, logger: logger)
        }
        guard let webhook = try await webhook(app: app, id: id) else { throw Failure.notFound }
        return (webhook, secret)
    }

    public func list(app: AppID) async throws -> [Webhook] {
        try await select("WHERE app_id = \(app) ORDER BY created_at, id")
    }

    public func webhook(app: AppID, id: UUID) async throws -> Webhook? {
        try await select("WHERE app_id = \(app) AND id = \(id)").first
    }

    private func select(_ condition: SQL) async throws -> [Webhook] {
        var result: [Webhook] = []
        for try await row in try await pool.query("SELECT \(Self.columns) FROM webhooks \(condition)", logger: logger)
            .decode(Row.self)
        {
            result.append(Self.webhook(row))
        }
        return result
    }

    /// The enabled subscriptions to `kind`, of every app.
    public func subscriptions(to kind: WebhookKind) async throws -> [Webhook] {
        try await select("WHERE enabled AND \(kind.rawValue) = ANY (kinds) ORDER BY app_id, created_at, id")
    }

    /// A crossing ``cross(_:platform:version:threshold:day:body:now:)`` recorded.
    public struct Crossing: Hashable, Sendable {
        public let webhook: UUID
        public let platform: String
        public let version: String
        public let threshold: Double

        public init(webhook: UUID, platform: String, version: String, threshold: Double) {
            self.webhook = webhook
            self.platform = platform
            self.version = version
            self.threshold = threshold
        }
    }

    /// The crossings recorded for `app`'s subscriptions: a day's pass records only the others, instead of
    /// trying each again in a transaction of its own.
    public func crossings(app: AppID) async throws -> Set<Crossing> {
        var result: Set<Crossing> = []
        for try await (webhook, platform, version, threshold) in try await pool.query(
            "SELECT webhook_id, platform, version, threshold FROM webhook_crossings WHERE app_id = \(app)", logger: logger
        ).decode((UUID, String, String, Double).self) {
            result.insert(Crossing(webhook: webhook, platform: platform, version: version, threshold: threshold))
        }
        return result
    }

    /// Records that a release crossed one of `webhook`'s thresholds, and queues `body` to it, in one
    /// transaction; nothing when the crossing was recorded before (it is told once, never retracted).
    /// Returns whether it was queued.
    @discardableResult
    public func cross(
        _ webhook: Webhook, platform: Platform, version: String, threshold: Double, day: String, body: String, now: Date
    ) async throws -> Bool {
        try await pool.transaction(logger: logger) { [logger] connection in
            var new = false
            for try await _ in try await connection.query(
                """
                INSERT INTO webhook_crossings (app_id, webhook_id, platform, version, threshold, day, recorded_at)
                SELECT app_id, id, \(platform), \(version), \(threshold), \(day)::date, \(now) FROM webhooks
                WHERE app_id = \(webhook.appId) AND id = \(webhook.id) AND enabled
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger
            ).decode(Int.self) { new = true }
            guard new else { return false }
            try await connection.query(
                """
                INSERT INTO webhook_deliveries (app_id, id, webhook_id, kind, body, created_at, next_at)
                VALUES (\(webhook.appId), gen_random_uuid(), \(webhook.id), \(WebhookKind.adoptionCrossed.rawValue), \(body),
                        \(now), \(now))
                """, logger: logger)
            return true
        }
    }

    /// Records that a health rule's condition held for a release, and queues `body` to every enabled
    /// subscription of the app to `health.regressed`, in one transaction; nothing when it was recorded
    /// before (told once per rule and release). Returns whether it was new.
    @discardableResult
    public func regressed(
        app: AppID, platform: Platform, rule: String, version: String, summary: String, body: String, now: Date
    ) async throws -> Bool {
        try await pool.transaction(logger: logger) { [logger] connection in
            var new = false
            for try await _ in try await connection.query(
                """
                INSERT INTO health_regressions (app_id, platform, rule_id, version, recorded_at, summary)
                VALUES (\(app), \(platform), \(rule), \(version), \(now), \(summary))
                ON CONFLICT DO NOTHING RETURNING 1
                """, logger: logger
            ).decode(Int.self) { new = true }
            guard new else { return false }
            try await Self.enqueue(.healthRegressed, body: body, app: app, now: now, on: connection, logger: logger)
            return true
        }
    }

    /// Removes a subscription with its deliveries; false when there was none.
    public func delete(app: AppID, id: UUID) async throws -> Bool {
        var deleted = false
        for try await _ in try await pool.query(
            "DELETE FROM webhooks WHERE app_id = \(app) AND id = \(id) RETURNING 1", logger: logger
        ).decode(Int.self) { deleted = true }
        return deleted
    }

    /// A new secret; the one it replaces still signs for ``rotationGrace``.
    public func rotate(app: AppID, id: UUID, now: Date) async throws -> (Webhook, secret: String) {
        let secret = WebhookSignature.newSecret()
        var found = false
        for try await _ in try await pool.query(
            """
            UPDATE webhooks SET previous_secret = secret, secret = \(secret),
                previous_until = \(now.addingTimeInterval(Self.rotationGrace))
            WHERE app_id = \(app) AND id = \(id) RETURNING 1
            """, logger: logger
        ).decode(Int.self) { found = true }
        guard found, let webhook = try await webhook(app: app, id: id) else { throw Failure.notFound }
        return (webhook, secret)
    }

    /// Enables a subscription again (one disabled after a day of failures): its pending deliveries go on.
    public func enable(app: AppID, id: UUID) async throws -> Webhook {
        try await pool.query(
            """
            UPDATE webhooks SET enabled = true, disabled_reason = NULL, failing_since = NULL
            WHERE app_id = \(app) AND id = \(id)
            """, logger: logger)
        guard let webhook = try await webhook(app: app, id: id) else { throw Failure.notFound }
        return webhook
    }

    /// Queues a `webhook.test` delivery to one subscription; returns its id.
    public func test(app: AppID, id: UUID, now: Date) async throws -> UUID {
        let delivery = UUID()
        let body = try CatalogCoding.json(TestBody(kind: "webhook.test", app: app.rawValue, webhook: id.uuidString.lowercased(), at: now))
        var found = false
        for try await _ in try await pool.query(
            """
            INSERT INTO webhook_deliveries (app_id, id, webhook_id, kind, body, created_at, next_at)
            SELECT app_id, \(delivery), id, 'webhook.test', \(body), \(now), \(now) FROM webhooks
            WHERE app_id = \(app) AND id = \(id)
            RETURNING 1
            """, logger: logger
        ).decode(Int.self) { found = true }
        guard found else { throw Failure.notFound }
        return delivery
    }

    private struct TestBody: Encodable {
        let kind: String
        let app: String
        let webhook: String
        let at: Date
    }

    /// Queues a delivery of `body` to every enabled subscription of `app` to `kind`, in the transaction
    /// of `connection`: the outbox row commits with the fact it tells, or neither does.
    static func enqueue(
        _ kind: WebhookKind, body: String, app: AppID, now: Date, on connection: StoreConnection, logger: Logger
    ) async throws {
        try await connection.query(
            """
            INSERT INTO webhook_deliveries (app_id, id, webhook_id, kind, body, created_at, next_at)
            SELECT app_id, gen_random_uuid(), id, \(kind.rawValue), \(body), \(now), \(now) FROM webhooks
            WHERE app_id = \(app) AND enabled AND \(kind.rawValue) = ANY (kinds)
            """, logger: logger)
    }

    /// The newest deliveries of a subscription, with their attempts.
    public func deliveries(app: AppID, webhook: UUID, limit: Int) async throws -> [WebhookDelivery] {
        var result: [WebhookDelivery] = []
        for try await (id, kind, state, created, next) in try await pool.query(
            """
            SELECT id, kind, state, created_at, CASE WHEN state = 'pending' THEN next_at END FROM webhook_deliveries
            WHERE app_id = \(app) AND webhook_id = \(webhook) ORDER BY created_at DESC, id LIMIT \(limit)
            """, logger: logger
        ).decode((UUID, String, String, Date, Date?).self) {
            result.append(WebhookDelivery(id: id, kind: kind, state: state, createdAt: created, nextAt: next, attempts: []))
        }
        guard !result.isEmpty else { return result }
        var attempts: [UUID: [WebhookDelivery.Attempt]] = [:]
        for try await (delivery, attempt, at, duration, status, error) in try await pool.query(
            """
            SELECT delivery_id, attempt, at, duration_ms, status, error FROM webhook_attempts
            WHERE app_id = \(app) AND delivery_id = ANY (\(result.map(\.id))::uuid[]) ORDER BY attempt
            """, logger: logger
        ).decode((UUID, Int, Date, Int, Int?, String?).self) {
            attempts[delivery, default: []].append(
                WebhookDelivery.Attempt(attempt: attempt, at: at, durationMilliseconds: duration, status: status, error: error))
        }
        for index in result.indices { result[index].attempts = attempts[result[index].id] ?? [] }
        return result
    }

    /// Whether a pass has work: a delivery of an enabled subscription due at `now`, or one that ended before
    /// `forgetBefore` (which ``prune(before:)`` forgets). One statement: the worker asks every second.
    public func anyWork(now: Date, forgetBefore: Date) async throws -> Bool {
        for try await work in try await pool.query(
            """
            SELECT EXISTS (SELECT 1 FROM webhook_deliveries d JOIN webhooks w ON w.app_id = d.app_id AND w.id = d.webhook_id
                           WHERE d.state = 'pending' AND d.next_at <= \(now) AND w.enabled)
                OR EXISTS (SELECT 1 FROM webhook_deliveries WHERE state <> 'pending' AND ended_at < \(forgetBefore))
            """, logger: logger
        ).decode(Bool.self) { return work }
        return false
    }

    /// Deliveries of enabled subscriptions due at `now`, oldest first.
    public func due(now: Date, limit: Int) async throws -> [Due] {
        var result: [Due] = []
        for try await row in try await pool.query(
            """
            SELECT d.app_id, d.id, d.webhook_id, w.url, w.format, d.body, d.attempts, d.created_at, w.secret,
                   CASE WHEN w.previous_until > \(now) THEN w.previous_secret END
            FROM webhook_deliveries d JOIN webhooks w ON w.app_id = d.app_id AND w.id = d.webhook_id
            WHERE d.state = 'pending' AND d.next_at <= \(now) AND w.enabled
            ORDER BY d.next_at LIMIT \(limit)
            """, logger: logger
        ).decode((AppID, UUID, UUID, String, String, String, Int, Date, String, String?).self) {
            result.append(
                Due(appId: row.0, id: row.1, webhookId: row.2, url: row.3, format: WebhookFormat(rawValue: row.4) ?? .json,
                    body: row.5, attempts: row.6, createdAt: row.7, secrets: [row.8] + (row.9.map { [$0] } ?? [])))
        }
        return result
    }

    /// What one attempt came to.
    public struct Outcome: Sendable {
        public var at: Date
        public var duration: Duration
        /// The answer's status; nil when none came.
        public var status: Int?
        public var error: String?
        /// When to try again; nil: delivered (a 2xx) or given up.
        public var retryAt: Date?

        public init(at: Date, duration: Duration, status: Int?, error: String?, retryAt: Date?) {
            self.at = at
            self.duration = duration
            self.status = status
            self.error = error
            self.retryAt = retryAt
        }

        public var delivered: Bool { status.map { (200..<300).contains($0) } ?? false }
    }

    /// Records an attempt and its outcome in one transaction: the delivery moves on (delivered, again at
    /// `retryAt`, or failed), and the subscription's run of failures with it; a subscription failing
    /// for a day straight is disabled, saying why. Nothing is written when the delivery is no longer
    /// pending (another instance recorded it).
    public func record(_ due: Due, _ outcome: Outcome) async throws {
        let state = outcome.delivered ? "delivered" : outcome.retryAt == nil ? "failed" : "pending"
        let milliseconds = Int(outcome.duration.components.seconds * 1_000 + outcome.duration.components.attoseconds / 1_000_000_000_000_000)
        try await pool.transaction(logger: logger) { [logger] connection in
            var moved = false
            for try await _ in try await connection.query(
                """
                UPDATE webhook_deliveries SET attempts = attempts + 1, state = \(state),
                    next_at = coalesce(\(outcome.retryAt), next_at),
                    ended_at = CASE WHEN \(state) = 'pending' THEN NULL ELSE \(outcome.at) END
                WHERE app_id = \(due.appId) AND id = \(due.id) AND state = 'pending' AND attempts = \(due.attempts)
                RETURNING 1
                """, logger: logger
            ).decode(Int.self) { moved = true }
            guard moved else { return }
            try await connection.query(
                """
                INSERT INTO webhook_attempts (app_id, delivery_id, attempt, at, duration_ms, status, error)
                VALUES (\(due.appId), \(due.id), \(due.attempts + 1), \(outcome.at), \(milliseconds), \(outcome.status),
                        \(outcome.error))
                """, logger: logger)
            if outcome.delivered {
                try await connection.query(
                    "UPDATE webhooks SET failing_since = NULL WHERE app_id = \(due.appId) AND id = \(due.webhookId)",
                    logger: logger)
            } else {
                let dayAgo = outcome.at.addingTimeInterval(-WebhookBackoff.giveUpAfter)
                try await connection.query(
                    """
                    UPDATE webhooks SET failing_since = coalesce(failing_since, \(outcome.at)),
                        enabled = enabled AND coalesce(failing_since, \(outcome.at)) > \(dayAgo),
                        disabled_reason = CASE WHEN coalesce(failing_since, \(outcome.at)) <= \(dayAgo)
                            THEN 'every attempt since ' || to_char(failing_since AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
                                 || ' failed; the last: ' || \(outcome.error ?? "status \(outcome.status ?? 0)")
                            ELSE disabled_reason END
                    WHERE app_id = \(due.appId) AND id = \(due.webhookId)
                    """, logger: logger)
            }
        }
    }

    /// Forgets deliveries that ended before `before`, with their attempts; returns how many.
    @discardableResult
    public func prune(before: Date) async throws -> Int {
        var count = 0
        for try await _ in try await pool.query(
            """
            DELETE FROM webhook_deliveries WHERE (app_id, id) IN (
                SELECT app_id, id FROM webhook_deliveries WHERE state <> 'pending' AND ended_at < \(before) LIMIT 10000)
            RETURNING 1
            """, logger: logger
        ).decode(Int.self) { count += 1 }
        return count
    }
}
