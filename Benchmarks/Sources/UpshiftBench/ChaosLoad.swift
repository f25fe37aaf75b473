import BenchmarkKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The load of `scripts/chaos`: events and checks at steady rates from many concurrent requests, paced
/// from the clock (an open loop: a slow or absent server does not slow the offer down), every exchange
/// recorded for the proofs.
///
/// - Events: half of the rate in batches of 1, half in batches of 100. A tenth of the batches is resent
///   unchanged: half of those right behind the first attempt, while it is still in flight, half a moment
///   after its answer. A batch whose attempt got no `200` is sent again after `Retry-After` (1 s without
///   one), up to 5 attempts, as the SDK keeps its queue.
/// - Checks: `GET /v1/apps/{app}/check` with an install id, so each one also records a `checked` event.
///
/// Foundation's URLSession (libcurl on Linux) carries the requests: the benchmarks' package keeps to
/// argument-parser, and a few hundred requests per second are well within it. Each session drives its
/// connections from one thread, so the checks have a session of their own and the posts two, and a
/// thousand posts held by the server do not delay the checks. All state lives on one serial queue; the
/// longest pause between two of its pacing ticks is reported, so that a stall of the load itself shows.
final class ChaosLoad: @unchecked Sendable {
    struct Settings {
        var baseURL: String
        var app: String
        var ingestKey: String
        var eventsPerSecond: Double
        var checksPerSecond: Double
        var seed: UInt64
        var installs = 5_000
        /// Requests in flight at most, per endpoint: checks keep their own share while events wait on an
        /// outage (a device's check does not queue behind another device's events).
        var eventsInFlightLimit = 1_024
        var checksInFlightLimit = 512
        var resendShare = 0.1
        var maximumAttempts = 5
    }

    /// A batch and what became of it: `batch` never changes (URLSession's handlers read it); the rest is
    /// read and written on the queue only.
    private final class BatchState: @unchecked Sendable {
        let batch: Batch
        var attempts = 0
        var firstAnswered = false
        var acknowledged = false

        init(_ batch: Batch) {
            self.batch = batch
        }
    }

    private enum Attempt { case first, resend, retry }

    let settings: Settings
    private let queue = DispatchQueue(label: "chaos.load")
    private let eventSessions: [URLSession]
    private let checkSession: URLSession
    private var nextEventSession = 0
    private let eventsURL: URL
    private let checkURL: String
    private var fleet: ChaosFleet
    private var random: SeededRandom
    private var timer: (any DispatchSourceTimer)?
    /// The start of the load (`start()` follows `init` at once); read from URLSession's threads too.
    private let origin = DispatchTime.now()
    private var running = false
    private var stoppedAt: Double?

    private var dueSingles = 0, dueHundreds = 0, dueChecks = 0
    private var eventsInFlight = 0, checksInFlight = 0
    private var exchanges: [Exchange] = []
    private var sent = Set<UUID>()
    private var acknowledged = Set<UUID>()
    private var rejected = OutcomeCounts()
    private var singleBatches = 0, hundredBatches = 0
    private var resentInFlight = 0, resentAfterAnswer = 0, retries = 0, skippedEvents = 0, skippedChecks = 0
    private var unreadable: [String] = []
    private var lastTick = 0.0, longestPause = 0.0, longestPauseEnded = 0.0
    private var retriedDuplicates = 0

    init(_ settings: Settings) {
        self.settings = settings
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 30
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        // A connection per request in flight, as many devices would have: none waits behind another.
        configuration.httpMaximumConnectionsPerHost = settings.eventsInFlightLimit
        eventSessions = (0..<2).map { _ in URLSession(configuration: configuration) }
        configuration.httpMaximumConnectionsPerHost = settings.checksInFlightLimit
        checkSession = URLSession(configuration: configuration)
        eventsURL = URL(string: settings.baseURL + "/v1/events")!
        checkURL = settings.baseURL + "/v1/apps/\(settings.app)/check?"
        fleet = ChaosFleet(app: settings.app, installs: settings.installs, seed: settings.seed)
        random = SeededRandom(seed: settings.seed ^ 0x10AD_0000_0000_0002)
    }

    /// Seconds since the load was made, on the monotonic clock.
    func now() -> Double {
        Double(DispatchTime.now().uptimeNanoseconds - origin.uptimeNanoseconds) / 1e9
    }

    func start() {
        queue.sync {
            running = true
            let timer = DispatchSource.makeTimerSource(queue: queue)
            timer.schedule(deadline: .now(), repeating: .milliseconds(5), leeway: .milliseconds(1))
            timer.setEventHandler { [weak self] in self?.tick() }
            timer.resume()
            self.timer = timer
        }
    }

    /// Stops offering new requests (retries and resends included), then waits up to `drain` seconds for
    /// the answers of those in flight. Returns how long the load ran.
    @discardableResult
    func stop(drain: Double = 35) -> Double {
        let seconds = queue.sync {
            running = false
            timer?.cancel()
            timer = nil
            let at = now()
            stoppedAt = at
            return at
        }
        let deadline = Date().addingTimeInterval(drain)
        while queue.sync(execute: { eventsInFlight + checksInFlight }) > 0 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.1)
        }
        let left = queue.sync { eventsInFlight + checksInFlight }
        if left > 0 { log("\(left) requests still unanswered \(Int(drain)) s after the load stopped; left out") }
        return seconds
    }

    // MARK: what the run reads

    /// Every exchange so far.
    func recorded() -> [Exchange] { queue.sync { exchanges } }

    /// Exchanges of `endpoint` answered at or after `since`.
    func recorded(_ endpoint: Exchange.Endpoint, since: Double) -> [Exchange] {
        queue.sync { exchanges.filter { $0.endpoint == endpoint && $0.answeredAt >= since } }
    }

    struct Ledger {
        var sent: Set<UUID>
        var acknowledged: Set<UUID>
        var rejected: OutcomeCounts
        var singleBatches: Int
        var hundredBatches: Int
        var resentInFlight: Int
        var resentAfterAnswer: Int
        var retries: Int
        var skippedEvents: Int
        var skippedChecks: Int
        /// `200` answers whose body could not be read (each one a failure of the run).
        var unreadable: [String]
        /// The longest time between two pacing ticks (5 ms apart when all is well), in seconds.
        var longestPause: Double
        var longestPauseEnded: Double
        /// Events a retry found stored already: an earlier attempt was committed, its answer lost.
        var retriedDuplicates: Int
    }

    func ledger() -> Ledger {
        queue.sync {
            Ledger(
                sent: sent, acknowledged: acknowledged, rejected: rejected, singleBatches: singleBatches,
                hundredBatches: hundredBatches, resentInFlight: resentInFlight, resentAfterAnswer: resentAfterAnswer,
                retries: retries, skippedEvents: skippedEvents, skippedChecks: skippedChecks, unreadable: unreadable,
                longestPause: longestPause, longestPauseEnded: longestPauseEnded, retriedDuplicates: retriedDuplicates)
        }
    }

    // MARK: pacing (on the queue)

    private func tick() {
        guard running else { return }
        let elapsed = now()
        if elapsed - lastTick > longestPause {
            longestPause = elapsed - lastTick
            longestPauseEnded = elapsed
        }
        lastTick = elapsed
        let batchRate = settings.eventsPerSecond / 2
        while Double(dueSingles) < elapsed * batchRate {
            dueSingles += 1
            newBatch(1)
        }
        while Double(dueHundreds) < elapsed * batchRate / 100 {
            dueHundreds += 1
            newBatch(100)
        }
        while Double(dueChecks) < elapsed * settings.checksPerSecond {
            dueChecks += 1
            check()
        }
    }

    private func newBatch(_ size: Int) {
        guard eventsInFlight < settings.eventsInFlightLimit else {
            skippedEvents += 1
            return
        }
        let state = BatchState(fleet.batch(size, now: Date()))
        if size == 1 { singleBatches += 1 } else { hundredBatches += 1 }
        sent.formUnion(state.batch.ids)
        send(state, .first)
        guard random.chance(settings.resendShare) else { return }
        if random.chance(0.5) {
            // Right behind the first attempt: in flight unless it was answered in between.
            resend(state)
        } else {
            let delay = 0.2 + random.unit() * 2
            // Weak, here and in every later callback: a resend, a retry or an answer can come after the run
            // let go of the load (its drain waits 35 s at most), and an unowned reference then stops the run.
            queue.asyncAfter(deadline: .now() + delay) { [weak self] in
                guard let self, running else { return }
                resend(state)
            }
        }
    }

    private func resend(_ state: BatchState) {
        guard eventsInFlight < settings.eventsInFlightLimit else {
            skippedEvents += 1
            return
        }
        if state.firstAnswered { resentAfterAnswer += 1 } else { resentInFlight += 1 }
        send(state, .resend)
    }

    private func send(_ state: BatchState, _ attempt: Attempt) {
        if attempt != .resend { state.attempts += 1 }
        var request = URLRequest(url: eventsURL)
        request.httpMethod = "POST"
        request.httpBody = state.batch.body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("Bearer \(settings.ingestKey)", forHTTPHeaderField: "Authorization")
        let sentAt = now()
        eventsInFlight += 1
        let session = eventSessions[nextEventSession]
        nextEventSession = (nextEventSession + 1) % eventSessions.count
        let batch = state.batch
        session.dataTask(with: request) { [weak self] data, response, _ in
            guard let self else { return }
            // Timed where URLSession delivers the answer, and read there: a burst of a thousand answers
            // (PostgreSQL back) must not hold up the pacing on the queue.
            let answeredAt = self.now()
            let response = response as? HTTPURLResponse
            let reading = response?.statusCode == 200
                ? Result { try IngestAnswer(parsing: data ?? Data()).settle(batch) } : nil
            queue.async {
                self.answered(state, attempt, sentAt: sentAt, answeredAt: answeredAt, response: response, reading: reading)
            }
        }.resume()
    }

    private func answered(
        _ state: BatchState, _ attempt: Attempt, sentAt: Double, answeredAt: Double, response: HTTPURLResponse?,
        reading: Result<(stored: [UUID], duplicates: Int, rejected: [String]), any Error>?
    ) {
        eventsInFlight -= 1
        let retryAfter = response?.value(forHTTPHeaderField: "Retry-After")
        exchanges.append(Exchange(
            endpoint: .events, sentAt: sentAt, answeredAt: answeredAt, status: response?.statusCode, retryAfter: retryAfter != nil))
        if attempt == .first { state.firstAnswered = true }
        if let reading {
            do {
                let settled = try reading.get()
                acknowledged.formUnion(settled.stored)
                for error in settled.rejected { rejected.add(error) }
                if attempt == .retry { retriedDuplicates += settled.duplicates }
                if settled.stored.count == state.batch.ids.count { state.acknowledged = true }
            } catch {
                unreadable.append("\(error)")
            }
            return
        }
        // A resend is a test of the server, not the client's own delivery: only the client's attempts retry.
        guard attempt != .resend, !state.acknowledged, state.attempts < settings.maximumAttempts else { return }
        let delay = min(5, retryAfter.flatMap(Double.init) ?? 1)
        scheduleRetry(state, after: delay)
    }

    private func scheduleRetry(_ state: BatchState, after delay: Double) {
        queue.asyncAfter(deadline: .now() + delay) { [weak self] in
            guard let self, running, !state.acknowledged else { return }
            guard eventsInFlight < settings.eventsInFlightLimit else {
                scheduleRetry(state, after: 1)
                return
            }
            retries += 1
            send(state, .retry)
        }
    }

    private func check() {
        guard checksInFlight < settings.checksInFlightLimit else {
            skippedChecks += 1
            return
        }
        var request = URLRequest(url: URL(string: checkURL + fleet.checkQuery())!)
        request.httpMethod = "GET"
        let sentAt = now()
        checksInFlight += 1
        checkSession.dataTask(with: request) { [weak self] _, response, _ in
            guard let self else { return }
            let response = response as? HTTPURLResponse
            let answeredAt = self.now()
            queue.async {
                self.checksInFlight -= 1
                self.exchanges.append(Exchange(
                    endpoint: .check, sentAt: sentAt, answeredAt: answeredAt, status: response?.statusCode,
                    retryAfter: response?.value(forHTTPHeaderField: "Retry-After") != nil))
            }
        }.resume()
    }
}
