import Foundation
import Logging
import Metrics
import ServiceLifecycle
import Synchronization
import UpshiftCore
import UpshiftStore

/// Why a submission was not stored.
enum IngestionError: Error, Equatable {
    /// The database did not answer in time, or failed: retry later.
    case databaseUnavailable
    /// More events are waiting than the writer buffers.
    case overloaded
    /// The server is shutting down.
    case shuttingDown
}

/// Group commit for the event log (docs/ARCHITECTURE.md, "Group commit"): requests hand their events to
/// `append`, a few flushers each take everything pending and write it with one `INSERT … SELECT FROM
/// unnest(…)`, and every request is answered only after the statement that carried its events committed.
///
/// A request is never answered `200` for events that are not committed. When the database fails, the
/// waiting requests and, for a short while, new ones get ``IngestionError/databaseUnavailable`` (503),
/// and the next flush tries again. On graceful shutdown the writer stops taking new events and
/// writes what is pending before it returns, within what is left of the shutdown's bound
/// (``ShutdownDeadline``): once that is spent, what is still pending is given up (observations
/// counted as dropped, waiting requests answered 503) instead of waiting on a database that does
/// not answer.
final class IngestionWriter: Service, Sendable {
    /// Posted events and check observations are buffered against separate limits, so that a backlog
    /// of observations never turns posts away.
    enum Kind: Int {
        case posted = 0, observation = 1
    }

    private struct Submission {
        var events: [Event]
        var kind: Kind
        /// Called once with whether each of `events`, by position, was new and stored, or with why nothing was.
        var completion: @Sendable (Result<[Bool], IngestionError>) -> Void
    }

    private struct State {
        var pending: [Submission] = []
        var pendingEvents = [0, 0]  // by Kind
        var idleFlushers: [CheckedContinuation<Void, Never>] = []
        var stopping = false
        var failFastUntil: ContinuousClock.Instant?
        /// Observations refused or not written: each is answered with a failure, which the check counts
        /// in `check_observations_dropped` (so this is that counter's value).
        var observationsDropped = 0
        /// Events given up at the shutdown deadline, by Kind.
        var givenUp = [0, 0]
    }

    private let log: EventLog
    private let clock: any WallClock
    private let settings: IngestionSettings
    private let logger: Logger
    private let state = Mutex(State())
    private let flushed: Counter
    private let flushFailures: Counter
    /// Events waiting for a flush, by kind (posted, observation).
    private let queued: [Meter]
    /// Rows per group commit.
    private let flushRows: Recorder
    private let wake: @Sendable () -> Void
    private let shutdown: ShutdownDeadline

    /// - Parameter wake: called after each commit (the projection runner listens to it).
    init(
        log: EventLog, clock: any WallClock, settings: IngestionSettings, metrics: any MetricsFactory,
        shutdown: ShutdownDeadline, logger: Logger, wake: @escaping @Sendable () -> Void = {}
    ) {
        self.log = log
        self.clock = clock
        self.settings = settings
        self.logger = logger
        self.wake = wake
        self.shutdown = shutdown
        // Group commits of events, and those that failed (database unavailable).
        self.flushed = Counter(label: "upshift_ingest_flushes_total", factory: metrics)
        self.flushFailures = Counter(label: "upshift_ingest_flush_failures_total", factory: metrics)
        self.queued = ["posted", "observation"].map {
            Meter(label: "upshift_ingest_queue_events", dimensions: [("kind", $0)], factory: metrics)
        }
        self.flushRows = Recorder(label: "upshift_ingest_flush_events", factory: metrics)
    }

    private func showQueue(_ pending: [Int]) {
        for (meter, count) in zip(queued, pending) { meter.set(count) }
    }

    /// Appends `events` (distinct app and id) and returns whether each, by position, was new, once they
    /// are committed.
    func append(_ events: [Event]) async throws -> [Bool] {
        guard !events.isEmpty else { return [] }
        return try await withCheckedThrowingContinuation { continuation in
            submit(events, kind: .posted, limit: settings.maximumPendingEvents) { continuation.resume(with: $0) }
        }
    }

    /// The events stored under the app and id of each of `events` (to tell resends from conflicts),
    /// looked up within the flush timeout.
    func stored(matching events: [Event]) async throws -> [Event] {
        guard !events.isEmpty else { return [] }
        do {
            return try await withDeadline(settings.flushTimeout) { try await self.log.storedEvents(matching: events) }
        } catch {
            logger.warning("event log lookup failed; answering 503", metadata: ["error": "\(String(reflecting: error))"])
            throw IngestionError.databaseUnavailable
        }
    }

    /// Queues `events` without waiting for them (check observations): `completion` learns the outcome.
    /// Refuses at once, calling `completion` with the error, when the buffer of `limit` events is full.
    func offer(_ events: [Event], limit: Int, completion: @escaping @Sendable (Result<[Bool], IngestionError>) -> Void) {
        submit(events, kind: .observation, limit: limit, completion: completion)
    }

    private func submit(
        _ events: [Event], kind: Kind, limit: Int,
        completion: @escaping @Sendable (Result<[Bool], IngestionError>) -> Void
    ) {
        let now = ContinuousClock.now
        let outcome: Result<(CheckedContinuation<Void, Never>?, [Int]), IngestionError> = state.withLock { state in
            let refusal: IngestionError? =
                if state.stopping { .shuttingDown }
                else if let until = state.failFastUntil, until > now { .databaseUnavailable }
                else if state.pendingEvents[kind.rawValue] + events.count > limit { .overloaded }
                else { nil }
            if let refusal {
                if kind == .observation { state.observationsDropped += events.count }
                return .failure(refusal)
            }
            state.pending.append(Submission(events: events, kind: kind, completion: completion))
            state.pendingEvents[kind.rawValue] += events.count
            return .success((state.idleFlushers.popLast(), state.pendingEvents))
        }
        switch outcome {
        case .failure(let error): completion(.failure(error))
        case .success(let (flusher, pending)):
            showQueue(pending)
            flusher?.resume()
        }
    }

    func run() async throws {
        await withGracefulShutdownHandler {
            await withTaskCancellationHandler {
                await withDiscardingTaskGroup { group in
                    for _ in 0..<max(1, settings.concurrentFlushes) {
                        group.addTask { await self.flushLoop() }
                    }
                }
            } onCancel: {
                self.shutdown.begin()
                self.stop()
            }
        } onGracefulShutdown: {
            self.shutdown.begin()
            self.stop()
        }
        let (dropped, givenUp) = state.withLock { ($0.observationsDropped, $0.givenUp) }
        let metadata: Logger.Metadata = [
            "check.observations.dropped": "\(dropped)", "observations.given_up": "\(givenUp[Kind.observation.rawValue])",
            "events.given_up": "\(givenUp[Kind.posted.rawValue])",
        ]
        if givenUp == [0, 0] {
            logger.info("ingestion writer stopped; pending events written", metadata: metadata)
        } else {
            logger.warning("ingestion writer stopped at the shutdown deadline; what was still pending is not written", metadata: metadata)
        }
    }

    /// Stops taking events; flushers write what is pending, then end.
    private func stop() {
        let idle = state.withLock { state in
            state.stopping = true
            defer { state.idleFlushers.removeAll() }
            return state.idleFlushers
        }
        for flusher in idle { flusher.resume() }
    }

    private func flushLoop() async {
        while let batch = await nextBatch() {
            await flush(batch)
        }
    }

    /// Everything pending (up to the batch limit), or nil once stopping with nothing left.
    private func nextBatch() async -> [Submission]? {
        while true {
            enum Step {
                case batch([Submission], pending: [Int])
                case done
                case wait
            }
            let step: Step = state.withLock { state in
                if !state.pending.isEmpty {
                    var taken = 0
                    var count = 0
                    while taken < state.pending.count,
                        count == 0 || count + state.pending[taken].events.count <= settings.maximumBatchEvents
                    {
                        let submission = state.pending[taken]
                        count += submission.events.count
                        state.pendingEvents[submission.kind.rawValue] -= submission.events.count
                        taken += 1
                    }
                    let batch = Array(state.pending.prefix(taken))
                    state.pending.removeFirst(taken)
                    return .batch(batch, pending: state.pendingEvents)
                }
                return state.stopping ? .done : .wait
            }
            switch step {
            case .batch(let batch, let pending):
                showQueue(pending)
                return batch
            case .done: return nil
            case .wait:
                await withCheckedContinuation { continuation in
                    let resumeNow = state.withLock { state in
                        if state.stopping || !state.pending.isEmpty { return true }
                        state.idleFlushers.append(continuation)
                        return false
                    }
                    if resumeNow { continuation.resume() }
                }
            }
        }
    }

    /// How long the next flush may take: its timeout, or what is left of a shutdown's bound when that
    /// is less; nil when nothing is left.
    private func flushTimeout() -> Duration? {
        guard let end = shutdown.end else { return settings.flushTimeout }
        let left = end - ContinuousClock.now
        return left > .zero ? min(settings.flushTimeout, left) : nil
    }

    private static func observations(in batch: [Submission]) -> Int {
        batch.reduce(0) { $0 + ($1.kind == .observation ? $1.events.count : 0) }
    }

    private func flush(_ batch: [Submission]) async {
        guard let timeout = flushTimeout() else {
            // The shutdown's bound is spent: give up without asking the database.
            state.withLock { state in
                for submission in batch { state.givenUp[submission.kind.rawValue] += submission.events.count }
                state.observationsDropped += Self.observations(in: batch)
            }
            for submission in batch { submission.completion(.failure(.shuttingDown)) }
            return
        }
        // One row per app and id: the first submission that carries it owns it; the requests of later
        // copies compare them with the stored event (a resend or a conflict). `rowOf` holds, for each
        // event of each submission, its row, or nil when an earlier submission owns it.
        let total = batch.reduce(0) { $0 + $1.events.count }
        var owned = Set<EventKey>(minimumCapacity: total)
        var rows: [Event] = []
        rows.reserveCapacity(total)
        var rowOf: [[Int?]] = []
        rowOf.reserveCapacity(batch.count)
        for submission in batch {
            rowOf.append(submission.events.map { event in
                guard owned.insert(event.key).inserted else { return nil }
                rows.append(event)
                return rows.count - 1
            })
        }
        let rowsToWrite = rows
        flushRows.record(rows.count)
        do {
            let stored = try await withDeadline(timeout) {
                try await self.log.append(rowsToWrite, recordedAt: self.clock.now())
            }
            flushed.increment()
            for (submission, rows) in zip(batch, rowOf) {
                submission.completion(.success(rows.map { $0.map { stored[$0] } ?? false }))
            }
            wake()
        } catch {
            flushFailures.increment()
            state.withLock { state in
                state.failFastUntil = ContinuousClock.now.advanced(by: settings.failFastAfterError)
                state.observationsDropped += Self.observations(in: batch)
            }
            logger.warning(
                "event log append failed; answering 503",
                metadata: ["events.count": "\(rows.count)", "error": "\(String(reflecting: error))"])
            for submission in batch {
                submission.completion(.failure(.databaseUnavailable))
            }
        }
    }
}
