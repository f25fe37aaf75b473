import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// A projection as the store runs it: its tables (one set per generation, names ending in `_g<n>`),
/// and how it applies a batch of the feed inside the batch's transaction. The fold itself is a pure
/// function of `UpshiftCore`; a definition loads the state the fold needs and writes its deltas.
public protocol ProjectionDefinition: Sendable {
    /// Stable name (`upshift projections rebuild NAME`).
    var name: String { get }
    /// Bumped when the fold or the tables change: a new version is rebuilt into new tables.
    var version: Int { get }
    /// Base names of the tables, each created as `<base>_g<generation>`.
    var tables: [String] { get }
    /// DDL for one generation; `t(base)` names the generation's table.
    func createStatements(_ t: (String) -> SQLIdentifier) -> [SQL]
    /// How many of `events` (in feed order) one batch takes.
    func batchLength(_ events: [ProjectionEvent]) -> Int
    /// Applies `events` in the open transaction of `connection`.
    func apply(_ events: [ProjectionEvent], in batch: inout ProjectionBatch, on connection: StoreConnection) async throws
    /// Applies every event up to `backfill.through` set-based to the generation's empty tables, in steps
    /// (``Backfill/step(_:on:_:)``: each writes in a transaction of its own, and a restart skips those
    /// committed): the same rows and dead letters as `apply` over the same events in any batches. The
    /// steps must be the same, in the same order, on every attempt.
    func backfill(_ backfill: Backfill, on connection: StoreConnection) async throws
    /// Takes erased installs out of the generation's figures, as if the log had never held their events
    /// (docs/OPERATIONS.md, "Erasure of an install"): deletes their rows of per-install state and moves every figure by
    /// what those rows counted. Their events that the log still holds (committed after the erasure's cut)
    /// are applied again afterwards, by ``ProjectionLeader/forget(_:from:)``.
    func forget(_ erased: ErasedInstalls, in batch: inout ProjectionBatch, on connection: StoreConnection) async throws
    /// The tables of closed aggregates, per app and UTC `day`, that a generation which read a shorter log
    /// takes over from the active generation of `version` it replaces, for the days before the log it read
    /// (docs/OPERATIONS.md, "Retention"); nil when it takes nothing over and needs the operator's consent
    /// to be switched in. Rows of those days never change: the events of those days are gone, so
    /// the new generation has none of them and the old one has nothing left to correct.
    func carriedTables(fromVersion version: Int) -> [CarriedTable]?
}

/// A table a new generation copies from the one it replaces (``ProjectionDefinition/carriedTables(fromVersion:)``):
/// its rows of the days before a date, one app at a time. It has `app_id` and `day` (a `date`) columns.
public struct CarriedTable: Sendable {
    public var table: String
    /// Every column, named alike in both generations.
    public var columns: [String]

    public init(_ table: String, columns: [String]) {
        self.table = table
        self.columns = columns
    }
}

/// Installs whose events were erased from the log, as a projection generation takes them out of its figures.
public struct ErasedInstalls: Sendable {
    /// The installs, each with its app.
    public var installs: [(appId: AppID, installId: UUID)]
    /// Their events that the generation applied and the log no longer holds, in feed order.
    public var events: [ProjectionEvent]
    /// Those of `events` adoption did not count: their day had closed before the feed reached them.
    public var uncountedByAdoption: Set<FeedPosition>

    public init(installs: [(appId: AppID, installId: UUID)], events: [ProjectionEvent], uncountedByAdoption: Set<FeedPosition> = []) {
        self.installs = installs
        self.events = events
        self.uncountedByAdoption = uncountedByAdoption
    }

    /// The installs as rows `(app_id, install_id)` of a FROM item (alias it).
    public var pairs: SQL { "unnest(\(installs.map(\.appId))::text[], \(installs.map(\.installId))::uuid[])" }

    /// The installs as rows `(app_id, platform, install_id)` of a FROM item (alias it), one for each platform
    /// of their app that `table` holds: so that a statement finds their rows through a key led by
    /// `(app_id, platform, install_id)` rather than reading every row of the app. The platforms are read
    /// by skipping through that key, a probe each.
    public func keys(in table: SQLIdentifier, on connection: StoreConnection, logger: Logger) async throws -> SQL {
        var platforms: [AppID: [String]] = [:]
        for app in Set(installs.map(\.appId)) {
            for try await platform in try await connection.query(
                """
                WITH RECURSIVE p(platform) AS (
                    SELECT min(platform) FROM \(table) WHERE app_id = \(app)
                    UNION ALL
                    SELECT (SELECT min(t.platform) FROM \(table) t WHERE t.app_id = \(app) AND t.platform > p.platform)
                    FROM p WHERE p.platform IS NOT NULL
                )
                SELECT platform FROM p WHERE platform IS NOT NULL
                """, logger: logger
            ).decode(String.self) {
                platforms[app, default: []].append(platform)
            }
        }
        var rows: (apps: [AppID], platforms: [String], installs: [UUID]) = ([], [], [])
        for install in installs {
            for platform in platforms[install.appId] ?? [] {
                rows.apps.append(install.appId)
                rows.platforms.append(platform)
                rows.installs.append(install.installId)
            }
        }
        return "unnest(\(rows.apps)::text[], \(rows.platforms)::text[], \(rows.installs)::uuid[])"
    }
}

extension ProjectionDefinition {
    public func batchLength(_ events: [ProjectionEvent]) -> Int { events.count }
    public func carriedTables(fromVersion version: Int) -> [CarriedTable]? { nil }
}

/// What a batch knows and reports besides its table writes.
public struct ProjectionBatch: Sendable {
    public let generation: Int
    /// The largest `recorded_at` applied before this batch; a definition advances it.
    public var maxRecordedAt: Date?
    public var deadLetters: [DeadLetter] = []
    let logger: Logger

    /// The generation's name for a table.
    public func table(_ base: String) -> SQLIdentifier { ProjectionTables.name(base, generation: generation) }
}

public enum ProjectionTables {
    /// `<base>_g<generation>`.
    public static func name(_ base: String, generation: Int) -> SQLIdentifier { SQLIdentifier("\(base)_g\(generation)") }
}

/// Every projection (docs/ARCHITECTURE.md, "Projections and reports"), in the order they are created.
public enum Projections {
    public static let all: [any ProjectionDefinition] = [
        InstallStateProjection(), AdoptionProjection(), ReleaseCohortsProjection(), PromptFunnelProjection(),
        ReleaseHealthProjection(),
    ]

    public static func named(_ name: String) -> (any ProjectionDefinition)? {
        all.first { $0.name == name }
    }
}
