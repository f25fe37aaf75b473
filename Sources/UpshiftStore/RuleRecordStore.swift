import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The rules' own record (`rule_records`): what each evaluation did, would have done, or why it was skipped.
public struct RuleRecordStore: Sendable {
    let pool: DatabasePool
    let logger: Logger

    public init(pool: DatabasePool, logger: Logger) {
        self.pool = pool
        self.logger = logger
    }

    /// Appends `record`; one that acted or would have queues its webhook deliveries in the same
    /// transaction (docs/OPERATIONS.md, "Webhooks").
    public func append(_ record: RuleRecord, appId: AppID) async throws {
        try await pool.transaction(logger: logger) { [logger] connection in
            try await Self.append(record, appId: appId, on: connection, logger: logger)
        }
    }

    /// Appends `record` and its webhook deliveries in the caller's transaction: a rule's action writes its
    /// record with the catalog event it makes, so neither is ever without the other.
    static func append(_ record: RuleRecord, appId: AppID, on connection: StoreConnection, logger: Logger) async throws {
        let kind = WebhookKind.of(record.outcome)
        let body = try kind.map { try CatalogCoding.json(RuleWebhookBody(kind: $0.rawValue, app: appId.rawValue, record: record)) }
        try await connection.query(
            """
            INSERT INTO rule_records (app_id, platform, rule_id, recorded_at, outcome, version, action, summary)
            VALUES (\(appId), \(record.platform), \(record.ruleId), \(record.at), \(record.outcome.rawValue),
                    \(record.version), \(record.action), \(record.summary))
            """, logger: logger)
        if let kind, let body {
            try await WebhookStore.enqueue(kind, body: body, app: appId, now: record.at, on: connection, logger: logger)
        }
    }

    /// What a webhook of a rule's kind delivers: the record, as `GET …/rules/{platform}/{rule}/records` shows it.
    struct RuleWebhookBody: Encodable {
        let kind: String
        let app: String
        let record: RuleRecord
    }

    /// The rule's newest record for `version` (nil: whatever the version), if any.
    public func last(appId: AppID, platform: Platform, ruleId: String, version: String?) async throws -> RuleRecord? {
        try await records(appId: appId, platform: platform, ruleId: ruleId, limit: 1, version: version).first
    }

    /// Newest first; `version` narrows to one release's records.
    public func records(
        appId: AppID, platform: Platform, ruleId: String, limit: Int, version: String? = nil
    ) async throws -> [RuleRecord] {
        let rows = try await pool.query(
            """
            SELECT recorded_at, outcome, version, action, summary FROM rule_records
            WHERE app_id = \(appId) AND platform = \(platform) AND rule_id = \(ruleId)
              AND (\(version)::text IS NULL OR version = \(version))
            ORDER BY record_id DESC LIMIT \(limit)
            """, logger: logger)
        var records: [RuleRecord] = []
        for try await (at, outcome, version, action, summary) in rows.decode((Date, String, String?, String?, String).self) {
            records.append(
                RuleRecord(
                    ruleId: ruleId, platform: platform, at: at, outcome: RuleRecord.Outcome(rawValue: outcome) ?? .failed,
                    version: version, action: action, summary: summary))
        }
        return records
    }
}
