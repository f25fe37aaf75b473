import AsyncHTTPClient
import Foundation
import Logging
import Metrics
import NIOCore
import NIOHTTP1
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// Delivers webhooks (docs/OPERATIONS.md, "Webhooks"): every ``WebhookSettings/interval``, when a delivery
/// is due, one instance (an advisory lock) sends the due ones, a few at a time, each a signed JSON POST to the
/// address its URL's host was checked to resolve to, and records every attempt: delivered on a 2xx, else
/// tried again after ``WebhookBackoff`` until the delivery is a day old. Deliveries that ended more than
/// 30 days ago are forgotten (a pass runs for that too when nothing is due).
struct WebhookWorker: Service {
    let store: WebhookStore
    let settings: WebhookSettings
    let database: DatabaseSettings
    let readiness: Readiness
    let clock: any WallClock
    let metrics: any MetricsFactory
    let logger: Logger
    /// What tells `adoption.crossed` after each UTC day (nil: nothing).
    var crossings: AdoptionCrossings?
    /// Deliveries sent at once.
    var concurrency = 8

    func run() async throws {
        await cancelWhenGracefulShutdown { await readiness.reached(.migrations) }
        await withDiscardingTaskGroup { group in
            group.addTask {
                // A pass also forgets old deliveries, so one runs for that alone when nothing is due.
                await LockedJob(name: "webhooks", database: database, logger: logger).run(
                    every: settings.interval,
                    due: {
                        let now = clock.now()
                        return try await store.anyWork(now: now, forgetBefore: now.addingTimeInterval(-WebhookStore.kept))
                    }
                ) { lease in try await pass { !lease.isLost } }
            }
            if let crossings { group.addTask { await watch(crossings) } }
        }
    }

    /// Evaluates each UTC day's crossings once after it closes, on every instance: a crossing is recorded
    /// with its delivery, so whichever instance comes second tells nothing again.
    private func watch(_ crossings: AdoptionCrossings) async {
        var done: UTCDay?
        while !Task.isCancelledOrShuttingDown {
            do {
                if let day = try await crossings.evaluate(now: clock.now(), done: done) { done = day }
            } catch where Task.isCancelledOrShuttingDown {
                return
            } catch {
                logger.error("adoption crossings failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: settings.interval) }
            } catch {
                return
            }
        }
    }

    /// Sends what is due until nothing is, while `leading` holds, then forgets old deliveries.
    func pass(leading: @escaping @Sendable () -> Bool = { true }) async throws {
        while leading(), !Task.isCancelledOrShuttingDown {
            let due = try await store.due(now: clock.now(), limit: concurrency * 4)
            if due.isEmpty { break }
            try await withThrowingTaskGroup(of: Void.self) { group in
                var rest = due[...]
                for _ in 0..<concurrency {
                    guard let next = rest.popFirst() else { break }
                    group.addTask { try await deliver(next) }
                }
                while try await group.next() != nil {
                    guard let next = rest.popFirst() else { continue }
                    group.addTask { try await deliver(next) }
                }
            }
        }
        let pruned = try await store.prune(before: clock.now().addingTimeInterval(-WebhookStore.kept))
        if pruned > 0 { logger.info("webhook deliveries forgotten", metadata: ["deliveries": "\(pruned)"]) }
    }

    /// One attempt of `due`, recorded even when this instance stopped leading meanwhile (a heartbeat missed on
    /// a loaded machine): the record is a compare-and-set on the attempt count, so when another instance took
    /// the delivery over and recorded its own attempt first, this one is dropped, and the delivery is never
    /// marked twice.
    func deliver(_ due: WebhookStore.Due) async throws {
        let began = ContinuousClock.now
        let at = clock.now()
        var status: Int?
        var failure: String?
        do {
            status = try await send(due, at: at)
            if let status, !(200..<300).contains(status) {
                failure = (300..<400).contains(status) ? "status \(status): redirects are not followed" : "status \(status)"
            }
        } catch let refused as WebhookTarget.Refused {
            failure = refused.description
        } catch {
            failure = Self.describe(error)
        }
        let delivered = failure == nil
        var retryAt: Date?
        if !delivered {
            // From the attempt's start: when it is due again does not hang on how long its answer took.
            let next = at.addingTimeInterval(WebhookBackoff.delay(afterAttempts: due.attempts + 1, jitter: Double.random(in: -1...1)))
            if next.timeIntervalSince(due.createdAt) <= WebhookBackoff.giveUpAfter { retryAt = next }
        }
        try await store.record(
            due, WebhookStore.Outcome(at: at, duration: ContinuousClock.now - began, status: status, error: failure, retryAt: retryAt))
        let outcome = delivered ? "delivered" : retryAt == nil ? "failed" : "retry"
        Counter(label: "upshift_webhook_attempts_total", dimensions: [("outcome", outcome)], factory: metrics).increment()
        if !delivered {
            logger.notice(
                "webhook delivery failed",
                metadata: [
                    "app": "\(due.appId)", "webhook": "\(due.webhookId)", "delivery": "\(due.id)", "attempt": "\(due.attempts + 1)",
                    "error": "\(failure ?? "")", "retry": "\(retryAt.map(Timestamp.format) ?? "no")",
                ])
        }
    }

    /// Sends the delivery once to the checked address of its URL: the answer's status.
    private func send(_ due: WebhookStore.Due, at: Date) async throws -> Int {
        let target = try await WebhookTarget.check(
            due.url, allowHTTP: settings.allowHTTP, allowPrivate: settings.allowPrivate, resolve: settings.resolve)
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .init(settings.timeout), read: .init(settings.timeout)),
            proxy: nil)
        configuration.dnsOverride = [target.host: target.address]
        let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        do {
            var request = HTTPClientRequest(url: due.url)
            request.method = .POST
            request.headers.add(name: "Content-Type", value: "application/json")
            request.headers.add(name: "User-Agent", value: "Upshift-Webhooks")
            request.headers.add(name: "Upshift-Delivery", value: due.id.uuidString.lowercased())
            let body: Data
            switch due.format {
            case .json:
                body = Data(due.body.utf8)
                request.headers.add(
                    name: "Upshift-Signature",
                    value: WebhookSignature.header(body: body, at: Int(at.timeIntervalSince1970), secrets: due.secrets))
            case .slack:
                // Slack's incoming webhooks take no signature: the URL is the secret.
                body = SlackMessage.body(from: Data(due.body.utf8), publicURL: settings.publicURL)
            }
            request.body = .bytes(ByteBuffer(bytes: body))
            let response = try await client.execute(request, timeout: .init(settings.timeout))
            // At most 64 KiB of the answer is read; nothing of it is kept.
            var read = 0
            for try await part in response.body {
                read += part.readableBytes
                if read >= 64 << 10 { break }
            }
            try await client.shutdown()
            return Int(response.status.code)
        } catch {
            try? await client.shutdown()
            throw error
        }
    }

    /// An error as an attempt records it: short, and never a secret (none is in an error of the client).
    static func describe(_ error: any Error) -> String {
        if let client = error as? HTTPClientError {
            if client == .deadlineExceeded || client == .readTimeout || client == .connectTimeout { return "timed out" }
            return "\(client)"
        }
        let text = "\(error)"
        return text.count > 300 ? String(text.prefix(300)) + "…" : text
    }
}

/// How webhooks are delivered (docs/OPERATIONS.md, "Webhooks").
public struct WebhookSettings: Sendable {
    /// `UPSHIFT_WEBHOOK_ALLOW_HTTP`: `http` URLs too, not only `https`.
    public var allowHTTP = false
    /// `UPSHIFT_WEBHOOK_ALLOW_PRIVATE`: private and loopback addresses too (tests, on-premise receivers).
    public var allowPrivate = false
    /// `UPSHIFT_PUBLIC_URL`: where people reach the dashboard (`https://upshift.example.com`), for the links of
    /// Slack messages; nil: no links.
    public var publicURL: String?
    /// How often the worker looks for due deliveries.
    public var interval: Duration = .seconds(1)
    /// Each attempt's bound: connecting, and the answer's head and body.
    public var timeout: Duration = .seconds(10)
    /// The addresses of a host name; tests set their own.
    public var resolve: @Sendable (String) async throws -> [String] = WebhookTarget.systemResolve

    public init() {}

    /// Checks `url` as a subscription's creation does; the error's description says why it is refused.
    public func check(_ url: String) async throws {
        _ = try await WebhookTarget.check(url, allowHTTP: allowHTTP, allowPrivate: allowPrivate, resolve: resolve)
    }
}
