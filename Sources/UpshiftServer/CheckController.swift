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
        observed = metrics.counter("check_observations", help: "checked events queued")
        dropped = metrics.counter(
            "check_observations_dropped", help: "checked events dropped (buffer full or database down)")
        limited = metrics.counter("check_rate_limited", help: "checks answered 429")
    }

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.get("/v1/apps/:app/check") { request, context in
            // The raw query, less the install id, names the answer: a repeated question skips parsing.
            let (key, install) = Self.splitInstall(request.uri.query ?? "")
            return try check(request, context: context, key: key, install: install) {
                Dictionary(request.uri.queryParameters.map { (String($0.key), String($0.value)) }) { first, _ in first }
            }
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
            return try check(request, context: context, key: nil, install: fields["install"]) { fields }
        }
    }

    /// Answers a check. `key` names the request without its install id (nil: do not reuse answers);
    /// `fields` parses the whole request, which a reused answer does not need.
    private func check(
        _ request: Request, context: UpshiftRequestContext, key: String?, install: String?,
        fields: () -> [String: String]
    ) throws -> Response {
        if limiter.rate > 0 {
            let client = ClientAddress.resolve(
                peer: context.peerAddress,
                forwardedFor: request.headers[values: .init("X-Forwarded-For")!].joined(separator: ","),
                trustedProxies: trustedProxies)
            if let retryAfter = limiter.acquire(client) {
                limited.increment()
                throw ProblemDetails(
                    .tooManyRequests, type: "urn:upshift:problem:rate-limited", title: "Too many requests",
                    detail: "at most \(limiter.rate.formatted()) checks per second per client"
                ).retryAfter(seconds: retryAfter)
            }
        }
        let appId = context.parameters.get("app") ?? ""
        guard let entry = snapshot.app(appId) else {
            _ = try Self.parse(fields())  // a malformed request is a 400 whether or not the app exists
            throw ProblemDetails.notFound("no app \(appId)")
        }
        let now = clock.now()
        let answer: CheckAnswerCache.Answer
        if let key, let cached = entry.answers.answer(key, now: now), install == nil || !cached.dependsOnInstall {
            answer = cached
        } else {
            let checkRequest = try Self.parse(fields())
            answer = try compute(checkRequest, entry: entry, now: now)
            // Keep it unless another install could get another answer to the same question.
            if let key, checkRequest.install == nil || !answer.dependsOnInstall { entry.answers.store(key, answer) }
        }
        if let install {
            guard let installId = UUIDText.parse(install) else {
                throw ProblemDetails.badRequest("install must be a UUID", field: "install")
            }
            observe(answer, installId: installId, appId: appId, now: now)
        }
        if let match = request.headers[.ifNoneMatch], match.split(separator: ",").contains(where: {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == answer.etag || tag == "W/" + answer.etag || tag == "*"
        }) {
            var headers = answer.headers
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: answer.headers, body: .init(byteBuffer: answer.body))
    }

    /// Decides and encodes an answer (DESIGN.md section 4).
    private func compute(_ request: CheckRequest, entry: CatalogSnapshot.Entry, now: Date) throws -> CheckAnswerCache.Answer {
        let decision = DecisionEngine.decide(request, catalog: entry.catalog, now: now)
        let body = try Self.encoder.encode(decision)
        let etag = "\"\(Self.fnv1a(body))\""
        return CheckAnswerCache.Answer(
            body: ByteBuffer(bytes: body), etag: etag,
            headers: [
                .contentType: "application/json", .eTag: etag, .cacheControl: "private, max-age=\(decision.checkAfterSeconds)",
            ],
            request: request, action: decision.action, reason: decision.reason, latestVersion: decision.latestVersion,
            interval: entry.answers.interval(platform: request.platform, now: now),
            dependsOnInstall: entry.answers.dependsOnInstall(platform: request.platform))
    }

    /// `a=1&install=…&b=2` → (`a=1&b=2`, the install id as sent).
    static func splitInstall(_ query: String) -> (String, String?) {
        guard hasInstall(query.utf8) else { return (query, nil) }
        var install: String?
        var rest: [Substring] = []
        for part in query.split(separator: "&") {
            if part.hasPrefix("install=") {
                let value = part.dropFirst("install=".count)
                // A UUID needs no escapes; decode (through Foundation, slowly) only when there are some.
                install = value.utf8.contains(UInt8(ascii: "%")) ? String(value).removingPercentEncoding : String(value)
            } else {
                rest.append(part)
            }
        }
        return (rest.joined(separator: "&"), install)
    }

    /// Whether a parameter of the query is `install=…`: a byte scan without allocation (Foundation's
    /// `contains` goes through NSString and showed in the profile of the check).
    private static func hasInstall(_ bytes: String.UTF8View) -> Bool {
        var parameterStart = true
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if parameterStart, bytes[index...].starts(with: "install=".utf8) { return true }
            parameterStart = bytes[index] == UInt8(ascii: "&")
            index = bytes.index(after: index)
        }
        return false
    }

    /// Records a `checked` event; never waits, and counts what it could not keep.
    private func observe(_ decision: CheckAnswerCache.Answer, installId: UUID, appId: String, now: Date) {
        let request = decision.request
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
            guard let uuid = UUIDText.parse(text) else {
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
