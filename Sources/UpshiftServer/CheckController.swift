import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import UpshiftCore
import UpshiftStore

/// `GET` and `POST /v1/apps/{app}/check` (DESIGN.md section 4): answered from the in-memory catalog
/// snapshot, never from the database; observations (`checked` events) are queued without waiting.
struct CheckController: Sendable {
    let snapshot: CatalogSnapshot
    let writer: IngestionWriter
    let clock: any WallClock
    let limiter: RateLimiter
    let trustedProxies: Set<String>
    let observationBuffer: Int
    let logger: Logger
    let observed: Prometheus.Counter
    let dropped: Prometheus.Counter
    let limited: Prometheus.Counter

    init(
        snapshot: CatalogSnapshot, writer: IngestionWriter, clock: any WallClock, settings: CheckSettings,
        trustedProxies: Set<String>, metrics: PrometheusCollectorRegistry, logger: Logger
    ) {
        self.snapshot = snapshot
        self.writer = writer
        self.clock = clock
        self.limiter = RateLimiter(rate: settings.ratePerClient, burst: settings.burstPerClient)
        self.trustedProxies = trustedProxies
        self.observationBuffer = settings.observationBuffer
        self.logger = logger
        observed = metrics.makeCounter(name: "upshift_check_observations_total", help: "checked events queued")
        dropped = metrics.makeCounter(
            name: "upshift_check_observations_dropped_total", help: "checked events dropped (buffer full or database down)")
        limited = metrics.makeCounter(name: "upshift_check_rate_limited_total", help: "checks answered 429")
    }

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.get("/v1/apps/:app/check") { request, context in
            let fields = Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
            return try check(request, context: context, fields: fields)
        }
        router.post("/v1/apps/:app/check") { request, context in
            let body = try await request.body.collect(upTo: 64 * 1024)
            guard let object = try? JSONValue.parse(Data(body.readableBytesView)).objectValue else {
                throw ProblemDetails.badRequest("the body must be a JSON object of check fields")
            }
            var fields: [String: String] = [:]
            for (key, value) in object {
                switch value {
                case .string(let text): fields[key] = text
                case .number(let number) where number == number.rounded(): fields[key] = String(Int(number))
                case .null: continue
                default: throw ProblemDetails.badRequest("\(key) must be a string", field: key)
                }
            }
            return try check(request, context: context, fields: fields)
        }
    }

    private func check(_ request: Request, context: UpshiftRequestContext, fields: [String: String]) throws -> Response {
        let client = ClientAddress.resolve(
            peer: context.peerAddress, forwardedFor: request.headers[values: .init("X-Forwarded-For")!].joined(separator: ","), trustedProxies: trustedProxies)
        if let retryAfter = limiter.acquire(client) {
            limited.increment()
            throw ProblemDetails(
                .tooManyRequests, type: "urn:upshift:problem:rate-limited", title: "Too many requests",
                detail: "at most \(limiter.rate.formatted()) checks per second per client"
            ).retryAfter(seconds: retryAfter)
        }
        let appId = context.parameters.get("app") ?? ""
        let checkRequest = try Self.parse(fields)
        guard let entry = snapshot.app(appId) else { throw ProblemDetails.notFound("no app \(appId)") }
        let now = clock.now()
        let answer = try answer(checkRequest, entry: entry, now: now)
        if let install = checkRequest.install { observe(answer, request: checkRequest, install: install, appId: appId, now: now) }

        var headers: HTTPFields = [
            .contentType: "application/json",
            .eTag: answer.etag,
            .cacheControl: "private, max-age=\(answer.checkAfterSeconds)",
        ]
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == answer.etag || tag == "W/" + answer.etag || tag == "*"
        }) {
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: answer.body))
    }

    /// The answer from the snapshot's cache when it holds one for this request and time interval,
    /// else computed by the decision engine (and kept when it does not depend on the install).
    private func answer(_ request: CheckRequest, entry: CatalogSnapshot.Entry, now: Date) throws -> CheckAnswerCache.Answer {
        let key = entry.answers.key(for: request)
        let interval = entry.answers.interval(platform: request.platform, now: now)
        if let key, let cached = entry.answers.answer(key, interval: interval) { return cached }
        let decision = DecisionEngine.decide(request, catalog: entry.catalog, now: now)
        let body = try Self.encoder.encode(decision)
        let answer = CheckAnswerCache.Answer(
            body: ByteBuffer(bytes: body), etag: "\"\(Self.fnv1a(body))\"", checkAfterSeconds: decision.checkAfterSeconds,
            action: decision.action, reason: decision.reason, latestVersion: decision.latestVersion, interval: interval)
        if let key { entry.answers.store(key, answer) }
        return answer
    }

    /// Records a `checked` event; never waits, and counts what it could not keep.
    private func observe(_ decision: CheckAnswerCache.Answer, request: CheckRequest, install: String, appId: String, now: Date) {
        guard let installId = UUID(uuidString: install) else { return }
        var data = EventData()
        data.add("action", decision.action.rawValue)
        data.add("reason", decision.reason.rawValue)
        data.add("latestVersion", decision.latestVersion)
        data.add("build", request.build)
        data.add("osVersion", request.os?.text)
        data.add("locale", request.locale)
        let event = Event(
            id: UUID(), type: .checked, occurredAt: now, appId: appId, installId: installId, platform: request.platform,
            appVersion: request.version.text, data: data.json)
        observed.increment()
        writer.offer([event], limit: observationBuffer) { [dropped, logger] result in
            if case .failure(let error) = result {
                dropped.increment()
                logger.warning("check observation dropped", metadata: ["reason": "\(error)", "app.id": "\(appId)"])
            }
        }
    }

    /// Every parameter that is present must parse; `platform` and `version` are required.
    static func parse(_ fields: [String: String]) throws -> CheckRequest {
        func version(_ name: String) throws -> Version? {
            guard let text = fields[name] else { return nil }
            guard let version = Version(text) else { throw ProblemDetails.badRequest("\(name) is not a valid version", field: name) }
            return version
        }
        guard let platform = fields["platform"] else { throw ProblemDetails.badRequest("platform is required", field: "platform") }
        guard EventValidator.isPlatform(platform) else {
            throw ProblemDetails.badRequest("platform is not a platform name", field: "platform")
        }
        guard let installed = try version("version") else {
            throw ProblemDetails.badRequest("version is required", field: "version")
        }
        var build: Int?
        if let text = fields["build"] {
            guard let value = Int(text), (0...EventValidator.maximumBuild).contains(value) else {
                throw ProblemDetails.badRequest("build must be a non-negative integer", field: "build")
            }
            build = value
        }
        var install: String?
        if let text = fields["install"] {
            guard text.utf8.count == 36, let uuid = UUID(uuidString: text) else {
                throw ProblemDetails.badRequest("install must be a UUID", field: "install")
            }
            install = uuid.uuidString.lowercased()
        }
        if let locale = fields["locale"], !EventValidator.isLocale(locale) {
            throw ProblemDetails.badRequest("locale is not a locale tag", field: "locale")
        }
        var channel = Channel.live
        if let text = fields["channel"] {
            guard let value = Channel(rawValue: text) else {
                throw ProblemDetails.badRequest("channel must be live or beta", field: "channel")
            }
            channel = value
        }
        return CheckRequest(
            platform: platform, version: installed, build: build, os: try version("os"), install: install,
            locale: fields["locale"], channel: channel, previous: try version("previous"))
    }

    static let encoder = CatalogCoding.encoder()

    /// FNV-1a, 64 bits: a cheap, stable ETag of the response body.
    static func fnv1a(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        data.withUnsafeBytes { bytes in
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
        }
        return String(hash, radix: 16)
    }
}

/// How the check endpoint protects itself.
public struct CheckSettings: Sendable {
    /// Checks per second per client address (0 turns the limit off).
    public var ratePerClient: Double = 20
    public var burstPerClient: Double = 60
    /// `checked` events waiting to be written beyond this are dropped (and counted).
    public var observationBuffer = 100_000

    public init() {}
}
