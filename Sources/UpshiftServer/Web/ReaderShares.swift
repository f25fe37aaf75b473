import Foundation
import Hummingbird
import Metrics
import Synchronization
import UpshiftStore

/// How much of the read side one token may take (docs/OPERATIONS.md, "Limits"): reports, the backtest,
/// admin reads and the dashboard's pages (a session counts against the token it was signed in with).
public struct ReaderSettings: Sendable {
    /// Requests per second per token, and the burst (`UPSHIFT_READER_RATE`, `UPSHIFT_READER_RATE_BURST`).
    public var ratePerToken = RateLimit(rate: 10, burst: 30)
    /// Reads one token may have under way at once (`UPSHIFT_READER_CONCURRENCY`).
    public var concurrencyPerToken = 2
    /// Backtests one token may have under way at once.
    public var backtestsPerToken = 1
    /// Backtests under way at once on the instance, whoever asks (`UPSHIFT_BACKTEST_CONCURRENCY`).
    public var backtestConcurrency = 1
    /// Backtests that may wait for one of those, and how long each waits at most before a `503`.
    public var backtestQueue = 4
    public var backtestWait: Duration = .seconds(10)

    public init() {}
}

/// The fair shares of ``ReaderSettings``, per token and server-wide.
final class ReaderShares: Sendable {
    let settings: ReaderSettings
    private let rate: RateLimiter
    /// Per token (its key id): reads and backtests under way. An entry leaves when both are 0.
    private let running = Mutex<[UUID: (reads: Int, backtests: Int)]>([:])
    /// Server-wide: backtests running and waiting.
    private let backtests = Mutex<(running: Int, waiting: Int)>((0, 0))
    /// `upshift_reader_refused_total{reason}`: requests refused for the token's concurrency (`429`) or
    /// because the backtest queue was full or too slow (`503`); the rate's refusals are
    /// `upshift_rate_limited_total{limit="reader"}`.
    private let refusedConcurrency: Counter
    private let refusedBacktestQueue: Counter

    /// The token of the read under way (set by ``ReaderShare``), for ``backtest(_:)``.
    @TaskLocal static var token: UUID?

    init(_ settings: ReaderSettings, metrics: any MetricsFactory) {
        self.settings = settings
        rate = RateLimiter(settings.ratePerToken, name: "reader", metrics: metrics)
        refusedConcurrency = Counter(label: "upshift_reader_refused_total", dimensions: [("reason", "concurrency")], factory: metrics)
        refusedBacktestQueue = Counter(label: "upshift_reader_refused_total", dimensions: [("reason", "backtest_queue")], factory: metrics)
    }

    /// Runs a read of `token` within its rate and its concurrency, else `429` with `Retry-After`.
    func read<T: Sendable>(token: UUID, _ body: () async throws -> T) async throws -> T {
        try enterRead(token)
        defer { unclaim(token, backtest: false) }
        return try await Self.$token.withValue(token) { try await body() }
    }

    /// A read whose answer is written after its handler returns (a streamed export): within the token's
    /// rate and concurrency like ``read(token:_:)``, counted until the hold is released, which its
    /// `deinit` does once the answer's body has been written or dropped.
    func hold(token: UUID) throws -> ReadHold {
        try enterRead(token)
        return ReadHold { [self] in unclaim(token, backtest: false) }
    }

    private func enterRead(_ token: UUID) throws {
        let rate = self.rate
        try rate.enforce(
            token.uuidString, cost: 1,
            detail: "at most \(rate.rate.formatted()) reads per second per token (bursts of \(rate.burst.formatted()))")
        try claim(token, backtest: false)
    }

    /// Runs a backtest: within the token's own (`429`), then in one of the instance's slots, waiting in a
    /// queue of at most ``ReaderSettings/backtestQueue`` for at most ``ReaderSettings/backtestWait`` (`503`).
    func backtest<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        let token = Self.token
        if let token { try claim(token, backtest: true) }
        defer { if let token { unclaim(token, backtest: true) } }
        try await enterBacktest()
        defer { backtests.withLock { $0.running -= 1 } }
        return try await body()
    }

    private func claim(_ token: UUID, backtest: Bool) throws {
        let limit = backtest ? settings.backtestsPerToken : settings.concurrencyPerToken
        let claimed = running.withLock { running in
            var entry = running[token] ?? (0, 0)
            guard (backtest ? entry.backtests : entry.reads) < limit else { return false }
            if backtest { entry.backtests += 1 } else { entry.reads += 1 }
            running[token] = entry
            return true
        }
        guard claimed else {
            refusedConcurrency.increment()
            let what = backtest ? "backtest\(limit == 1 ? "" : "s")" : "read\(limit == 1 ? "" : "s")"
            throw ProblemDetails.rateLimited("at most \(limit) \(what) at a time per token", retryAfter: 1)
        }
    }

    private func unclaim(_ token: UUID, backtest: Bool) {
        running.withLock { running in
            guard var entry = running[token] else { return }
            if backtest { entry.backtests -= 1 } else { entry.reads -= 1 }
            running[token] = entry.reads == 0 && entry.backtests == 0 ? nil : entry
        }
    }

    /// Takes a backtest slot of the instance, waiting in the queue when none is free.
    private func enterBacktest() async throws {
        let settings = self.settings
        enum Entry { case running, waiting, full }
        let entry: Entry = backtests.withLock { state in
            if state.running < settings.backtestConcurrency {
                state.running += 1
                return .running
            }
            guard state.waiting < settings.backtestQueue else { return .full }
            state.waiting += 1
            return .waiting
        }
        switch entry {
        case .running: return
        case .full:
            refusedBacktestQueue.increment()
            throw ProblemDetails.unavailable("as many backtests as this server runs and queues are under way; retry shortly", retryAfter: 2)
        case .waiting: break
        }
        // Waits its turn, checking every 20 ms (a backtest takes hundreds of milliseconds).
        let deadline = ContinuousClock.now.advanced(by: settings.backtestWait)
        do {
            while true {
                let entered = backtests.withLock { state in
                    guard state.running < settings.backtestConcurrency else { return false }
                    state.running += 1
                    state.waiting -= 1
                    return true
                }
                if entered { return }
                guard ContinuousClock.now < deadline else {
                    refusedBacktestQueue.increment()
                    throw ProblemDetails.unavailable(
                        "waited \(settings.backtestWait.components.seconds) s for another backtest to end; retry shortly", retryAfter: 2)
                }
                try await Task.sleep(for: .milliseconds(20))
            }
        } catch {
            backtests.withLock { $0.waiting -= 1 }
            throw error
        }
    }
}

/// One read of ``ReaderShares/hold(token:)``, released when the last reference goes.
final class ReadHold: Sendable {
    private let release: @Sendable () -> Void

    init(release: @escaping @Sendable () -> Void) {
        self.release = release
    }

    deinit { release() }
}

/// Runs each request of its routes as a read of its caller's token (``ReaderShares``); after the
/// authentication that names the caller (a request without one, the dashboard signed out, passes).
struct ReaderShare: RouterMiddleware {
    typealias Context = UpshiftRequestContext
    let shares: ReaderShares

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        // No caller: the dashboard's sign-in page, which is no read of a token.
        guard let identity = context.identity else { return try await next(request, context) }
        return try await shares.read(token: identity.key.id) { try await next(request, context) }
    }
}
