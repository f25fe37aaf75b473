import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The store sync's schedule (`store_sync`), read and written on the connection of the instance that
/// holds the sync's advisory lock: one instance at a time asks the App Store, and the stored times keep
/// it to one request per app per interval across restarts and takeovers.
public struct AppStoreSyncSchedule: Sendable {
    /// One app and platform's row.
    public struct Entry: Sendable, Equatable {
        public var appId: AppID
        public var platform: Platform
        public var attemptedAt: Date
        public var nextAt: Date
        public var failures: Int
        public var outcome: String
        public var detail: String?

        public init(
            appId: AppID, platform: Platform, attemptedAt: Date, nextAt: Date, failures: Int, outcome: String,
            detail: String? = nil
        ) {
            self.appId = appId
            self.platform = platform
            self.attemptedAt = attemptedAt
            self.nextAt = nextAt
            self.failures = failures
            self.outcome = outcome
            self.detail = detail
        }
    }

    let connection: StoreConnection
    let timeout: Duration
    let logger: Logger

    static let lockKey = "upshift:store-sync"

    /// Runs `body` with the schedule when this instance takes the sync's advisory lock (nil when another
    /// instance holds it), on a connection of its own (``AdvisoryLeadership``).
    public static func whileLeading<T: Sendable>(
        settings: DatabaseSettings, timeout: Duration, logger: Logger,
        _ body: @Sendable (AppStoreSyncSchedule) async throws -> T
    ) async throws -> T? {
        try await AdvisoryLeadership.whileHolding(
            lockKey, settings: settings, applicationName: "upshift-store-sync", timeout: timeout, logger: logger
        ) { lease in
            try await body(AppStoreSyncSchedule(connection: lease.connection, timeout: timeout, logger: logger))
        }
    }

    /// Every row.
    public func entries() async throws -> [Entry] {
        let logger = self.logger
        return try await bounded { connection in
            let rows = try await connection.query(
                "SELECT app_id, platform, attempted_at, next_at, failures, outcome, detail FROM store_sync", logger: logger)
            var entries: [Entry] = []
            for try await (app, platform, attempted, next, failures, outcome, detail)
                in rows.decode((AppID, Platform, Date, Date, Int, String, String?).self)
            {
                entries.append(
                    Entry(
                        appId: app, platform: platform, attemptedAt: attempted, nextAt: next, failures: failures,
                        outcome: outcome, detail: detail))
            }
            return entries
        }
    }

    /// Writes `entry` (inserted or replaced). An attempt is written before its request, so that a crash
    /// while the store answers does not lead to a second request within the interval.
    public func save(_ entry: Entry) async throws {
        let logger = self.logger
        try await bounded { connection in
            _ = try await connection.query(
                """
                INSERT INTO store_sync (app_id, platform, attempted_at, next_at, failures, outcome, detail)
                VALUES (\(entry.appId), \(entry.platform), \(entry.attemptedAt), \(entry.nextAt), \(entry.failures),
                        \(entry.outcome), \(entry.detail))
                ON CONFLICT (app_id, platform) DO UPDATE SET attempted_at = excluded.attempted_at,
                    next_at = excluded.next_at, failures = excluded.failures, outcome = excluded.outcome,
                    detail = excluded.detail
                """, logger: logger)
        }
    }

    private func bounded<T: Sendable>(_ operation: @escaping @Sendable (StoreConnection) async throws -> T) async throws -> T {
        let connection = self.connection
        return try await withDeadline(timeout, abandonWhen: { connection.isClosed }) { try await operation(connection) }
    }
}
