import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// Runs every projection (docs/ARCHITECTURE.md, "One runner per projection"), as a service of `upshift
/// serve` with the `projections` role.
///
/// Each generation of each projection gets a worker. A worker is active only while it holds the
/// generation's advisory lock, so one instance applies batches and the others stand by, retrying the
/// lock every `standbyInterval`: when the active instance dies, its session ends, the lock is free and
/// a standby takes over from the stored checkpoint. A building generation (a new version, or
/// `upshift projections rebuild`) is switched in when it has caught up.
public final class ProjectionRunner: Service, Sendable {
    let store: ProjectionStore
    let definitions: [any ProjectionDefinition]
    let settings: ProjectionSettings
    let signal: FeedSignal
    let readiness: Readiness
    let logger: Logger
    private let running = Mutex(Set<String>())
    private let applied: Counter
    private let deadLettered: Counter
    private let metrics: any MetricsFactory
    /// Per projection: the generations this instance leads now (0 while it stands by).
    private let leading: [String: Meter]
    private let led = Mutex([String: Int]())

    init(
        store: ProjectionStore, definitions: [any ProjectionDefinition] = Projections.all, settings: ProjectionSettings,
        signal: FeedSignal, readiness: Readiness, metrics: any MetricsFactory, logger: Logger
    ) {
        self.readiness = readiness
        self.store = store
        self.definitions = definitions
        self.settings = settings
        self.signal = signal
        self.logger = logger
        // Events applied by projection runners, and those they could not apply.
        applied = Counter(label: "upshift_projection_events_total", factory: metrics)
        deadLettered = Counter(label: "upshift_projection_dead_letters_total", factory: metrics)
        var leading: [String: Meter] = [:]
        for definition in definitions {
            let gauge = Meter(label: "upshift_projection_leading", dimensions: [("projection", definition.name)], factory: metrics)
            gauge.set(0)
            leading[definition.name] = gauge
        }
        self.leading = leading
        self.metrics = metrics
    }

    /// The lag of an active projection this instance leads: events of the log it has not applied yet
    /// (counted up to a million) and the age of the oldest of them, in seconds (0 and 0 when it is
    /// caught up). Measured when a read comes back: full, empty, or in between.
    private struct Lag {
        let events: Meter
        let seconds: Meter

        init(projection: String, factory: any MetricsFactory) {
            events = Meter(label: "upshift_projection_lag_events", dimensions: [("projection", projection)], factory: factory)
            seconds = Meter(label: "upshift_projection_lag_seconds", dimensions: [("projection", projection)], factory: factory)
        }

        static let cap = 1_000_000

        /// Takes the gauges out of `/metrics` (the leader let go).
        func destroy() {
            events.destroy()
            seconds.destroy()
        }
    }

    /// A runner outside `upshift serve` (the CLI's rebuild): no wake-ups, no metrics.
    public convenience init(store: ProjectionStore, settings: ProjectionSettings = ProjectionSettings(), logger: Logger) {
        self.init(
            store: store, settings: settings, signal: FeedSignal(), readiness: Readiness(required: []),
            metrics: NOOPMetricsHandler.instance, logger: logger)
    }

    public func run() async throws {
        // Shutdown cancels the workers: a batch in flight rolls back and is read again next time.
        await cancelWhenGracefulShutdown { await self.supervise() }
    }

    private func supervise() async {
        // The registry exists once the start-up migration ran.
        await readiness.reached(.migrations)
        await withDiscardingTaskGroup { group in
            // Supervise: start a worker for every generation that is active or building. Workers end
            // when their generation is retired; shutdown cancels them all.
            var prepared = false
            while !Task.isCancelled {
                do {
                    if !prepared {  // once: the code's versions do not change while it runs
                        try await store.prepare(definitions)
                        prepared = true
                    }
                    for generation in try await store.generations() where generation.state != .retired {
                        guard let definition = definitions.first(where: { $0.name == generation.name }) else { continue }
                        let id = "\(generation.name):\(generation.generation)"
                        let isNew = running.withLock { $0.insert(id).inserted }
                        guard isNew else { continue }
                        group.addTask {
                            await self.work(definition, generation: generation.generation)
                            _ = self.running.withLock { $0.remove(id) }
                        }
                    }
                } catch {
                    if !Task.isCancelled {
                        logger.warning("projection supervisor failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
                    }
                }
                try? await Task.sleep(for: settings.standbyInterval)
            }
            group.cancelAll()
        }
    }

    /// Leads (or stands by for) one generation until it is retired or the service stops.
    private func work(_ definition: any ProjectionDefinition, generation: Int) async {
        var failures = 0
        while !Task.isCancelled {
            do {
                let outcome = try await store.lead(definition, generation: generation, limit: settings.batchTimeout) { leader in
                    self.countLeading(definition.name, by: 1)
                    defer { self.countLeading(definition.name, by: -1) }
                    return try await self.drive(leader)
                }
                switch outcome {
                case .retired?: return
                case .stopped?: return
                case nil: break  // another instance leads: stand by
                }
                failures = 0
            } catch {
                if Task.isCancelled { return }
                failures += 1
                logger.warning(
                    "projection runner failed; retrying",
                    metadata: ["projection": "\(definition.name)", "generation": "\(generation)", "error": "\(String(reflecting: error))"])
            }
            // Stand by, or back off after failures: 0.5 s, 1 s, 2 s, then 4 s.
            let pause: Duration = failures == 0 ? settings.standbyInterval : .milliseconds(250 << min(failures, 4))
            try? await Task.sleep(for: pause)
        }
    }

    /// Moves `upshift_projection_leading{projection}` as this instance takes or lets go of a lock.
    private func countLeading(_ name: String, by change: Int) {
        led.withLock { led in  // set under the lock: two changes at once cannot land in the wrong order
            led[name, default: 0] += change
            leading[name]?.set(Double(led[name, default: 0]))
        }
    }

    private func commitHook(for name: String) -> (@Sendable () async throws -> Void)? {
        guard let hook = settings.beforeCommit else { return nil }
        return { try await hook(name) }
    }

    /// Erased installs a generation takes out of its figures in one transaction: each brings its rows and
    /// its erased events, so a few keep the transaction well within the projections' bound.
    static let erasuresPerTransaction = 20

    enum Outcome: Sendable {
        case retired, stopped
    }

    /// Rebuilds `definition` into a new generation from the start of the log, reporting progress after
    /// each batch, and switches it in once caught up (`upshift projections rebuild`). When another
    /// process already runs that generation, follows its progress instead.
    /// With `acceptShorterHistory`, the generation replaces the active one although retention had
    /// dropped months of the log it read (``ProjectionStore/ShorterHistory``).
    public func rebuild(
        _ definition: any ProjectionDefinition, acceptShorterHistory: Bool = false,
        progress: @escaping @Sendable (ProjectionGeneration) -> Void
    ) async throws -> ProjectionGeneration {
        if !acceptShorterHistory, let from = try await store.shorterHistory(definition) {
            // Refused before anything is built: the new generation would not be switched in.
            throw ProjectionStore.ShorterHistory(projection: definition.name, generation: nil, from: from)
        }
        let building = try await store.beginRebuild(definition)
        if acceptShorterHistory { _ = try await store.acceptShorterHistory(definition) }
        progress(building)
        while true {
            let outcome = try await store.lead(definition, generation: building.generation, limit: settings.batchTimeout) { leader in
                try await self.drive(leader, untilActive: true, progress: progress)
            }
            if outcome != nil { break }
            // Another instance leads this generation: watch it.
            let generations = try await store.generations()
            guard let mine = generations.first(where: { $0.name == definition.name && $0.generation == building.generation })
            else { break }
            progress(mine)
            if mine.state == .active { break }
            try await Task.sleep(for: .milliseconds(500))
        }
        guard let result = try await store.generations().first(where: {
            $0.name == definition.name && $0.generation == building.generation
        }) else {
            throw ProjectionRebuildError(description: "generation \(building.generation) of \(definition.name) was dropped")
        }
        return result
    }

    /// Applies batches while there are events, waits for a wake-up or the poll interval when there are none.
    /// A building generation is switched in when a read comes back empty; with `untilActive` the
    /// drive ends there.
    private func drive(
        _ leader: ProjectionLeader, untilActive: Bool = false,
        progress: (@Sendable (ProjectionGeneration) -> Void)? = nil
    ) async throws -> Outcome {
        let name = leader.definition.name
        let beforeCommit = commitHook(for: name)
        let lag = Lag(projection: name, factory: metrics)
        // Only the leader says how far behind it is: a follower's figures would be stale.
        defer { lag.destroy() }
        guard var current = try await leader.current() else { return .retired }
        logger.info("projection runner active", metadata: ["projection": "\(name)", "generation": "\(leader.generation)"])
        // A long log from the start: set-based, once most of it is below the snapshot horizon.
        while current.checkpoint == .start, let threshold = settings.backfillThreshold.map({ max($0, 1) }),
            try await store.feedLength() >= threshold, !Task.isCancelled
        {
            let started = ContinuousClock.now
            guard
                let result = try await leader.backfill(
                    from: current, leaving: threshold, limit: settings.backfillTimeout,
                    options: settings.backfillOptions(rebuilding: current.state == .building))
            else {
                try await Task.sleep(for: settings.pollInterval)
                guard let reloaded = try await leader.current() else { return .retired }
                current = reloaded
                continue
            }
            current = result.checkpoint
            progress?(current)
            applied.increment(by: current.events)
            if result.deadLetters > 0 { deadLettered.increment(by: Int64(result.deadLetters)) }
            logger.notice(
                "projection backfilled",
                metadata: [
                    "projection": "\(name)", "generation": "\(leader.generation)", "events": "\(current.events)",
                    "deadLetters": "\(result.deadLetters)", "duration": "\(ContinuousClock.now - started)",
                ])
        }
        // Batches are sized by time, as a catch-up's writes: each holds a transaction id, and with it the
        // feeds of every projection in the cluster, while it writes. The first is small; each next one
        // follows how long the last ones took (at most `batchSize` events, `WriteSizer`).
        var sizer = WriteSizer(maximum: settings.batchSize)
        var refused = false
        let keptThrough = try await leader.keptThrough()
        var erasuresAskedAt: ContinuousClock.Instant?
        while !Task.isCancelled {
            guard current.state != .retired else { return .retired }
            // Erased installs leave the figures between batches, under the lock (at most once a second).
            if erasuresAskedAt.map({ ContinuousClock.now - $0 >= settings.erasureInterval }) ?? true {
                erasuresAskedAt = .now
                let erasures = try await leader.pendingErasures(limit: Self.erasuresPerTransaction)
                if !erasures.isEmpty {
                    // A full set may leave more: ask again at once.
                    if erasures.count == Self.erasuresPerTransaction { erasuresAskedAt = nil }
                    do {
                        try await leader.forget(erasures, from: current)
                        logger.notice(
                            "erased installs taken out of the projection",
                            metadata: ["projection": "\(name)", "generation": "\(leader.generation)", "installs": "\(erasures.count)"])
                    } catch is ProjectionLeader.CheckpointMoved {
                        guard let reloaded = try await leader.current() else { return .retired }
                        current = reloaded
                    }
                    continue
                }
            }
            let seen = signal.count
            let checkpoint = current.checkpoint
            let events = try await leader.read(after: checkpoint, limit: sizer.rows, keptThrough: keptThrough)
            if current.state == .active {
                let behind =
                    events.count < sizer.rows
                    ? events.count : try await leader.backlog(after: checkpoint, cap: Lag.cap)
                lag.events.set(behind)
                lag.seconds.set(events.first.map { max(0, Date().timeIntervalSince($0.recordedAt)) } ?? 0)
            }
            if events.isEmpty {
                if current.state == .building {
                    do {
                        try await store.activate(leader.definition, generation: leader.generation)
                        logger.notice("projection rebuilt and switched in", metadata: ["projection": "\(name)", "generation": "\(leader.generation)"])
                        current = try await leader.current() ?? current
                        progress?(current)
                        if untilActive { return .stopped }
                        continue
                    } catch let refusal as ProjectionStore.ShorterHistory where !untilActive {
                        // It keeps following the feed beside the active one, and is switched in once accepted.
                        if !refused { logger.warning("projection rebuilt but not switched in", metadata: ["reason": "\(refusal)"]) }
                        refused = true
                    }
                }
                await signal.wait(after: seen, timeout: settings.pollInterval)
                // Notice a switch made elsewhere (a rebuild by the CLI retires this generation).
                guard let reloaded = try await leader.current() else { return .retired }
                current = reloaded
                continue
            }
            let batch = Array(events.prefix(leader.definition.batchLength(events)))
            do {
                let from = current
                let began = ContinuousClock.now
                let result = try await leader.apply(batch, from: from, beforeCommit: beforeCommit)
                // A batch that filled the limit, or took longer than the target, sizes the next; a short
                // one that was quick (the live load, a few events at a time) leaves the limit as it is.
                let took = ContinuousClock.now - began
                let target = settings.xidTarget(rebuilding: current.state == .building)
                if batch.count >= sizer.rows || took > target {
                    sizer.record(rows: batch.count, took: took, target: target)
                }
                current = result.checkpoint
                progress?(current)
                applied.increment(by: Int64(batch.count))
                if result.deadLetters > 0 { deadLettered.increment(by: Int64(result.deadLetters)) }
            } catch is ProjectionLeader.CheckpointMoved {
                // A rebuild switched in (by the CLI or another instance) retires this generation: an
                // operator's doing, not a fault. A checkpoint moved by another runner is one.
                guard let reloaded = try await leader.current() else {
                    logger.notice("projection generation retired under the runner (a rebuild switched in)", metadata: ["projection": "\(name)", "generation": "\(leader.generation)"])
                    return .retired
                }
                logger.warning("projection checkpoint moved under the runner; reloading", metadata: ["projection": "\(name)"])
                current = reloaded
            }
        }
        return .stopped
    }
}

struct ProjectionRebuildError: Error, CustomStringConvertible {
    let description: String
}
