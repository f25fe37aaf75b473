import Foundation
import Logging
import PostgresNIO
import UpshiftCore

/// The runner of one projection generation, while it holds the lock: reads the feed and applies
/// batches on its own connection.
public struct ProjectionLeader: Sendable {
    let connection: StoreConnection
    let heartbeat: LeaderHeartbeat
    public let definition: any ProjectionDefinition
    public let generation: Int
    let limit: Duration
    let logger: Logger

    /// The generation's registry row as stored now (nil once it was dropped).
    public func current() async throws -> ProjectionGeneration? {
        let (definition, generation, logger) = (definition, generation, logger)
        return try await bounded { connection in
            try await ProjectionStore.generations(on: connection, only: (definition.name, generation), logger: logger).first
        }
    }

    /// The next at most `limit` events of the gap-free feed after `position`, on the leader's connection;
    /// below `keptThrough` (``keptThrough()``) with the catalog events kept from dropped months.
    public func read(after position: FeedPosition, limit: Int, keptThrough: FeedPosition? = nil) async throws -> [ProjectionEvent] {
        let logger = self.logger
        return try await bounded { connection in
            try await FeedReader.read(on: connection, after: position, limit: limit, keptThrough: keptThrough, logger: logger)
        }
    }

    /// The last place in the feed a dropped event had (``LogRetention``); nil while retention dropped
    /// nothing. Only a generation that starts below it (one built after the drop) has kept catalog events
    /// ahead of it: retention drops no month a generation has not passed.
    public func keptThrough() async throws -> FeedPosition? {
        let logger = self.logger
        return try await bounded { connection in
            for try await (tx, position) in try await connection.query(
                "SELECT dropped_tx::text, dropped_pos FROM log_retention", logger: logger
            ).decode((String, Int64).self) {
                return FeedPosition(transaction: UInt64(tx) ?? 0, position: position)
            }
            return nil
        }
    }

    /// How many events of the log lie after `position`, up to `cap`.
    public func backlog(after position: FeedPosition, cap: Int) async throws -> Int {
        let logger = self.logger
        return try await bounded { connection in
            try await FeedReader.backlog(on: connection, after: position, cap: cap, logger: logger)
        }
    }

    /// Lets go of the lock; nothing to do when the connection closed (the session, and its lock, ended).
    func unlock(_ key: String) async {
        let logger = self.logger
        _ = try? await bounded { connection in
            try await connection.query("SELECT pg_advisory_unlock(hashtextextended(\(key), 0))", logger: logger)
        }
    }

    /// Runs `operation` on the leader's connection within the leader's time limit. A connection that
    /// closed fails the operation at once (``ConnectionLost``); one that outlasts the limit is closed
    /// (``DeadlineExceeded``). Either way the runner lets go and starts over from the stored checkpoint,
    /// which tells it whether the last batch committed.
    private func bounded<T: Sendable>(
        limit: Duration? = nil, _ operation: @escaping @Sendable (StoreConnection) async throws -> T
    ) async throws -> T {
        let connection = self.connection
        let limit = limit ?? self.limit
        guard !connection.isClosed else { throw ConnectionLost() }
        do {
            return try await heartbeat.whileBusy {
                try await withDeadline(limit, abandonWhen: { connection.isClosed }) { try await operation(connection) }
            }
        } catch let error as DeadlineExceeded {
            logger.warning(
                "projection statement exceeded its time limit; closing its connection",
                metadata: ["projection": "\(definition.name)", "limit": "\(limit)"])
            try? await connection.close()
            throw error
        }
    }

    /// The result of a batch.
    public struct Applied: Sendable {
        public var checkpoint: ProjectionGeneration
        public var deadLetters: Int
    }

    /// Thrown when the checkpoint was not where the batch started: another runner moved it (or the
    /// generation was retired). Nothing was written; reload and go on.
    public struct CheckpointMoved: Error {}

    /// Applies `events` (which follow `from.checkpoint` in the feed) in one transaction: the checkpoint
    /// compare-and-set first, then the projection's writes and dead letters. `beforeCommit` runs last
    /// inside the transaction (tests interrupt batches there).
    public func apply(
        _ events: [ProjectionEvent], from: ProjectionGeneration,
        beforeCommit: (@Sendable () async throws -> Void)? = nil
    ) async throws -> Applied {
        guard let last = events.last else { return Applied(checkpoint: from, deadLetters: 0) }
        var maxRecorded = from.maxRecordedAt
        for event in events where maxRecorded.map({ event.recordedAt > $0 }) ?? true { maxRecorded = event.recordedAt }
        let newMaxRecorded = maxRecorded
        let definition = self.definition
        let generation = self.generation
        let logger = self.logger
        return try await bounded { connection in
            try await connection.transaction(logger: logger) { connection in
                try await Self.advance(
                    definition.name, generation: generation, from: from, to: last.feedPosition,
                    maxRecordedAt: newMaxRecorded, events: events.count, on: connection, logger: logger)
                var batch = ProjectionBatch(generation: generation, maxRecordedAt: from.maxRecordedAt, logger: logger)
                try await definition.apply(events, in: &batch, on: connection)
                let dead = batch.deadLetters
                try await ProjectionStore.storeDeadLetters(
                    dead, projection: definition.name, generation: generation, on: connection, logger: logger)
                try await beforeCommit?()
                var checkpoint = from
                checkpoint.checkpoint = last.feedPosition
                checkpoint.maxRecordedAt = newMaxRecorded
                checkpoint.events += Int64(events.count)
                return Applied(checkpoint: checkpoint, deadLetters: dead.count)
            }
        }
    }

    /// An erasure this generation has yet to take out of its figures (``forget(_:from:)``).
    public struct PendingErasure: Sendable {
        let appId: AppID
        let id: UUID
        let installId: UUID
        /// The install's events in transactions from here on were not erased (new data).
        let cut: UInt64
    }

    /// Erasures whose events the log no longer holds and that this generation, created before they
    /// were erased, has not corrected for yet: at most `limit`, oldest first.
    public func pendingErasures(limit: Int = 100) async throws -> [PendingErasure] {
        let (name, generation, logger) = (definition.name, generation, logger)
        return try await bounded { connection in
            var pending: [PendingErasure] = []
            for try await (app, id, install, cut) in try await connection.query(
                """
                SELECT r.app_id, r.id, r.install_id, r.cut_tx::text FROM erasures r
                WHERE r.done_at IS NULL AND r.erased_at IS NOT NULL AND r.install_id IS NOT NULL
                  AND r.erased_at >= (SELECT created_at FROM projections WHERE name = \(name) AND generation = \(generation))
                  AND NOT EXISTS (
                      SELECT 1 FROM erasure_corrections c
                      WHERE c.app_id = r.app_id AND c.erasure_id = r.id AND c.name = \(name) AND c.generation = \(generation))
                ORDER BY r.erased_at LIMIT \(limit)
                """, logger: logger
            ).decode((AppID, UUID, UUID, String).self) {
                pending.append(PendingErasure(appId: app, id: id, installId: install, cut: UInt64(cut) ?? 0))
            }
            return pending
        }
    }

    /// Takes the installs of `erasures` out of the generation's figures, in one transaction at the
    /// checkpoint `from` (a compare-and-set, as a batch's): the projection forgets their state
    /// (``ProjectionDefinition/forget(_:in:on:)``), their erased events leave the dead letters, and their
    /// events that the log still holds up to the checkpoint (committed after the cut: new data) are
    /// applied again. The generation then counts as corrected for each.
    public func forget(_ erasures: [PendingErasure], from: ProjectionGeneration) async throws {
        guard !erasures.isEmpty else { return }
        let (definition, generation, logger) = (definition, generation, logger)
        let checkpoint: SQL = "(\(String(from.checkpoint.transaction))::text::xid8, \(from.checkpoint.position))"
        let requests: SQL = """
            unnest(\(erasures.map(\.appId))::text[], \(erasures.map(\.id))::uuid[], \(erasures.map(\.installId))::uuid[],
                   \(erasures.map { String($0.cut) })::text[]) AS k(app_id, erasure_id, install_id, cut)
            """
        try await bounded { connection in
            try await connection.transaction(logger: logger) { connection in
                try await Self.advance(
                    definition.name, generation: generation, from: from, to: from.checkpoint,
                    maxRecordedAt: from.maxRecordedAt, events: 0, on: connection, logger: logger)
                let erased = try await FeedReader.decode(
                    connection.query(
                        """
                        SELECT \(FeedReader.columns) FROM (
                            SELECT x.* FROM erasure_events x JOIN \(requests) USING (app_id, erasure_id)
                        ) AS event_log
                        WHERE (tx_id, position) <= \(checkpoint)
                        ORDER BY event_log.tx_id, event_log.position
                        """, logger: logger))
                var uncounted: Set<FeedPosition> = []
                for try await (tx, position) in try await connection.query(
                    """
                    SELECT x.tx_id::text, x.position FROM erasure_events x JOIN \(requests) USING (app_id, erasure_id)
                    WHERE NOT x.adoption_counted AND (x.tx_id, x.position) <= \(checkpoint)
                    """, logger: logger
                ).decode((String, Int64).self) {
                    uncounted.insert(FeedPosition(transaction: UInt64(tx) ?? 0, position: position))
                }
                var batch = ProjectionBatch(generation: generation, maxRecordedAt: from.maxRecordedAt, logger: logger)
                try await definition.forget(
                    ErasedInstalls(
                        installs: erasures.map { ($0.appId, $0.installId) }, events: erased, uncountedByAdoption: uncounted),
                    in: &batch, on: connection)
                try await connection.query(
                    """
                    DELETE FROM projection_dead_letters d
                    USING erasure_events x JOIN \(requests) USING (app_id, erasure_id)
                    WHERE d.name = \(definition.name) AND d.generation = \(generation)
                      AND d.tx_id = x.tx_id AND d.position = x.position
                    """, logger: logger)
                let kept = try await FeedReader.decode(
                    connection.query(
                        """
                        SELECT \(FeedReader.columns) FROM (
                            SELECT e.* FROM event_log e JOIN \(requests)
                              ON e.app_id = k.app_id AND e.install_id = k.install_id AND e.tx_id >= k.cut::xid8
                            WHERE e.tx_id >= \(String(erasures.map(\.cut).min() ?? 0))::text::xid8
                        ) AS event_log
                        WHERE (tx_id, position) <= \(checkpoint)
                        ORDER BY event_log.tx_id, event_log.position
                        """, logger: logger))
                if !kept.isEmpty { try await definition.apply(kept, in: &batch, on: connection) }
                try await ProjectionStore.storeDeadLetters(
                    batch.deadLetters, projection: definition.name, generation: generation, on: connection, logger: logger)
                try await connection.query(
                    """
                    INSERT INTO erasure_corrections (app_id, erasure_id, name, generation)
                    SELECT app_id, erasure_id, \(definition.name), \(generation) FROM \(requests)
                    ON CONFLICT DO NOTHING
                    """, logger: logger)
            }
        }
    }

    /// Moves the checkpoint from where `from` left it: a compare-and-set that throws ``CheckpointMoved``
    /// (and so rolls the transaction back) when another runner moved it first.
    private static func advance(
        _ name: String, generation: Int, from: ProjectionGeneration, to last: FeedPosition, maxRecordedAt: Date?,
        events: Int, on connection: StoreConnection, logger: Logger
    ) async throws {
        let rows = try await connection.query(
            """
            UPDATE projections
            SET last_tx = \(String(last.transaction))::text::xid8, last_pos = \(last.position),
                max_recorded_at = \(maxRecordedAt), events = events + \(events), updated_at = clock_timestamp()
            WHERE name = \(name) AND generation = \(generation) AND state <> 'retired'
              AND last_tx = \(String(from.checkpoint.transaction))::text::xid8 AND last_pos = \(from.checkpoint.position)
            RETURNING 1
            """, logger: logger)
        var moved = true
        for try await _ in rows.decode(Int.self) { moved = false }
        if moved { throw CheckpointMoved() }
    }

    /// Catches a generation whose checkpoint is at the start of the log up with the feed, set-based
    /// (``Backfill``), in steps that commit one by one, within `limit`. Nil, with nothing done, when the
    /// feed is empty or when `leaving` events or more lie beyond the snapshot horizon (a transaction that
    /// is still open holds them back: better to wait for it than to leave them to batches).
    ///
    /// The bound (the last event covered) is stored when a backfill starts, and each step commits with
    /// the count of steps done: a backfill that stopped (its time limit, a lost connection, a restart)
    /// continues where it stopped, with the same bound. The statements that write a row per install (or
    /// more) run in `options.chunkEvents`-sized install ranges, each read by a cursor and written in
    /// transactions of `options.rowsPerWrite` rows, so that no transaction holds a transaction id (and
    /// the feed's horizon, docs/ARCHITECTURE.md, "The horizon is cluster-wide") for more than a moment.
    ///
    /// With `options.rest` above 0 (a rebuild, beside an active generation that serves meanwhile) its
    /// statements run without parallel workers and each step is followed by a pause `rest` times as long
    /// as the step: the rebuild takes longer and leaves the machine to the projections that serve.
    public func backfill(
        from: ProjectionGeneration, leaving: Int, limit: Duration, options: Backfill.Options = .init()
    ) async throws -> Applied? {
        precondition(from.checkpoint == .start, "a backfill starts from the start of the log")
        let (definition, generation, logger) = (definition, generation, logger)
        return try await bounded(limit: limit) { connection in
            // A backfill under way: its bound and the steps it committed.
            var stored: (through: FeedPosition, steps: Int)?
            var resumed = false
            for try await (tx, position, steps) in try await connection.query(
                """
                SELECT backfill_tx::text, backfill_pos, backfill_steps FROM projections
                WHERE name = \(definition.name) AND generation = \(generation) AND backfill_tx IS NOT NULL
                """, logger: logger
            ).decode((String, Int64, Int).self) {
                stored = (FeedPosition(transaction: UInt64(tx) ?? 0, position: position), steps)
                resumed = true
            }
            if stored == nil {
                // The bound: the last event below the snapshot horizon. (The ORDER BY names the table's
                // columns: the output column `tx_id::text` would sort as text.)
                var through: FeedPosition?
                for try await (tx, position) in try await connection.query(
                    """
                    SELECT tx_id::text, position FROM event_log WHERE tx_id < pg_snapshot_xmin(pg_current_snapshot())
                    ORDER BY event_log.tx_id DESC, event_log.position DESC LIMIT 1
                    """, logger: logger
                ).decode((String, Int64).self) {
                    through = FeedPosition(transaction: UInt64(tx) ?? 0, position: position)
                }
                guard let through else { return nil }
                let beyond = try await connection.query(
                    """
                    SELECT count(*)::int8 FROM (
                        SELECT 1 FROM event_log
                        WHERE (tx_id, position) > (\(String(through.transaction))::text::xid8, \(through.position))
                        LIMIT \(leaving)) x
                    """, logger: logger)
                for try await count in beyond.decode(Int.self) where count >= leaving { return nil }
                let started = try await connection.query(
                    """
                    UPDATE projections SET backfill_tx = \(String(through.transaction))::text::xid8,
                        backfill_pos = \(through.position), backfill_steps = 0
                    WHERE name = \(definition.name) AND generation = \(generation) AND state <> 'retired'
                      AND backfill_tx IS NULL AND last_tx = '0' AND last_pos = 0
                    RETURNING 1
                    """, logger: logger)
                var began = false
                for try await _ in started.decode(Int.self) { began = true }
                guard began else { throw CheckpointMoved() }
                stored = (through, 0)
            }
            let (through, committed) = stored!
            var count = 0
            var maxRecordedAt = Date.distantPast
            for try await (events, recorded) in try await connection.query(
                """
                SELECT count(*)::int8, max(recorded_at) FROM event_log
                WHERE (tx_id, position) <= (\(String(through.transaction))::text::xid8, \(through.position))
                """, logger: logger
            ).decode((Int, Date).self) { (count, maxRecordedAt) = (events, recorded) }
            // Settings of the session, for the steps' transactions and the reads between them; reset also
            // when a step fails, since the connection goes on to lead batches.
            // (A cursor is planned for its whole result, as the statement it replaced was.)
            try await connection.query("SET work_mem = '128MB'", logger: logger)
            try await connection.query("SET cursor_tuple_fraction = 1", logger: logger)
            if options.rest > 0 { try await connection.query("SET max_parallel_workers_per_gather = 0", logger: logger) }
            let chunkEvents = max(1, options.chunkEvents)
            let backfill = Backfill(
                projection: definition.name, generation: generation, through: through, maxRecordedAt: maxRecordedAt,
                chunks: (count + chunkEvents - 1) / chunkEvents, options: options, committedSteps: committed,
                resumed: resumed, logger: logger
            ) { [heartbeat] pause in
                // The connection idles through a rest as long as the step before it: the heartbeat must go
                // on there, or a rest over 2 s would read to it as a session lost.
                try await heartbeat.whileIdle { try await Task.sleep(for: pause) }
            }
            @Sendable func reset() async throws {
                try await connection.query("RESET work_mem", logger: logger)
                try await connection.query("RESET cursor_tuple_fraction", logger: logger)
                try await connection.query("RESET max_parallel_workers_per_gather", logger: logger)
            }
            do {
                try await definition.backfill(backfill, on: connection)
            } catch {
                try? await reset()
                throw error
            }
            try await reset()
            // Statistics now, since the first reports must not be planned as if the tables were empty; and
            // the pages marked all-visible, since the tables were written in many transactions that
            // autovacuum would otherwise visit while the first batches run.
            for table in definition.tables {
                try await connection.query("VACUUM (ANALYZE) \(ProjectionTables.name(table, generation: generation))", logger: logger)
            }
            try await connection.transaction(logger: logger) { connection in
                try await Self.advance(
                    definition.name, generation: generation, from: from, to: through, maxRecordedAt: maxRecordedAt,
                    events: count, on: connection, logger: logger)
                try await connection.query(
                    """
                    UPDATE projections SET backfill_tx = NULL, backfill_pos = NULL, backfill_steps = 0
                    WHERE name = \(definition.name) AND generation = \(generation)
                    """, logger: logger)
            }
            var checkpoint = from
            checkpoint.checkpoint = through
            checkpoint.maxRecordedAt = maxRecordedAt
            checkpoint.events += Int64(count)
            return Applied(checkpoint: checkpoint, deadLetters: backfill.deadLetters)
        }
    }
}
