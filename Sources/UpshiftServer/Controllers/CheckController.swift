import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Metrics
import UpshiftCore
import UpshiftStore

/// `GET` and `POST /v1/apps/{app}/check` (DESIGN.md section 4): answered from the in-memory catalog
/// snapshot, never from the database; observations (`checked` events) are queued without waiting. The
/// feeds for existing client libraries share its limiter and cache (`CheckController+Feeds.swift`).
struct CheckController: Sendable {
    let snapshot: CatalogSnapshot
    let writer: IngestionWriter
    let clock: any WallClock
    let limiter: RateLimiter
    let trustedProxies: Set<String>
    let observationBuffer: Int
    let answers: CheckAnswerCache
    let logger: Logger
    let observed: Counter
    let dropped: Counter
    let droppedLog = LogThrottle()
    /// `upshift_check_decisions_total{action,reason}`, made once for every pair.
    let decisions: [Outcome: Counter]
    let cacheBytes: Meter
    /// `upshift_check_cache_lookups_total{result}`: answers that could be reused, found (`hit`) or computed (`miss`).
    let cacheHits: Counter
    let cacheMisses: Counter

    /// A `POST` body holds a few short fields.
    static let maximumBody = 64 * 1024

    init(
        snapshot: CatalogSnapshot, writer: IngestionWriter, clock: any WallClock, settings: CheckSettings,
        trustedProxies: Set<String>, metrics: any MetricsFactory, logger: Logger
    ) {
        self.snapshot = snapshot
        self.writer = writer
        self.clock = clock
        self.limiter = RateLimiter(settings.ratePerClient, name: "check", metrics: metrics)
        self.trustedProxies = trustedProxies
        self.observationBuffer = settings.observationBuffer
        self.answers = CheckAnswerCache(byteLimit: settings.cacheBytes)
        self.logger = logger
        // checked events queued; dropped (buffer full or database down); the cache's bytes
        observed = ServerMetrics.counter("check_observations", factory: metrics)
        dropped = ServerMetrics.counter("check_observations_dropped", factory: metrics)
        cacheBytes = ServerMetrics.gauge("check_cache_bytes", factory: metrics)
        cacheHits = ServerMetrics.counter("check_cache_lookups", dimensions: [("result", "hit")], factory: metrics)
        cacheMisses = ServerMetrics.counter("check_cache_lookups", dimensions: [("result", "miss")], factory: metrics)
        var decisions: [Outcome: Counter] = [:]
        for action in CheckAction.allCases {
            for reason in CheckReason.allCases {
                decisions[Outcome(action: action, reason: reason)] = ServerMetrics.counter(
                    "check_decisions", dimensions: [("action", action.rawValue), ("reason", reason.rawValue)],
                    factory: metrics)
            }
        }
        self.decisions = decisions
    }

    /// An answer's action and reason.
    struct Outcome: Hashable {
        let action: CheckAction
        let reason: CheckReason
    }

    /// `GET` and `POST /v1/apps/{app}/check` and the feeds, relative to `/v1/apps/{app}`: public, limited
    /// per client address before anything but the head is read.
    var routes: RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(
            middleware: ClientRateLimit(
                limiter: limiter, trustedProxies: trustedProxies,
                detail: "at most \(limiter.rate.formatted()) checks per second per client"))
            .get("check", use: checkQuery)
            .post("check", use: checkBody)
            .get("appcast.xml", use: appcast)
            .get("versions.plist", use: versionsPlist)
            .get("lookup", use: lookup)
            .get(":country/lookup", use: lookup)
        return routes
    }

    /// `GET …/check?platform=&version=…`: a query seen before (but for its install id) is not parsed again.
    @Sendable func checkQuery(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = request.uri.query ?? ""
        let split = Self.splitInstall(query)
        let target = app(context)
        var checkRequest: CheckRequest
        var question: CheckAnswerCache.Question?
        if split.clean, let target, let indexed = answers.request(app: target.id, generation: target.entry.generation, query: split.rest) {
            // The same query, but for its install id, parsed before: only the install id is new.
            (checkRequest, question) = indexed
            if let raw = split.install {
                guard let text = RequestText.percentDecoded(raw.utf8), let install = UUIDText.parse(text) else {
                    throw ProblemDetails.badRequest("install must be a UUID", field: "install")
                }
                checkRequest.install = install.uuidString.lowercased()
            }
        } else {
            checkRequest = try Self.parse(QueryParameters(query: query).values)
            if split.clean, let target {
                var indexed = checkRequest
                indexed.install = nil
                let asked = CheckAnswerCache.Question(indexed, app: target.id, generation: target.entry.generation)
                answers.store(indexed, question: asked, query: split.rest)
                cacheBytes.set(Double(answers.bytes))
                question = asked
            }
        }
        return try check(checkRequest, question: question, request: request, app: target, context: context)
    }

    /// `POST …/check` with the same fields as a JSON object.
    @Sendable func checkBody(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try request.requireContentType("application/json")
        let body = try await request.body.collect(upTo: Self.maximumBody)
        let fields = try Self.fields(JSONValue.parse(Data(body.readableBytesView)))
        return try check(try Self.parse(fields), request: request, app: app(context), context: context)
    }

    /// The app of the path, when it exists (a malformed request is a `400` whether or not it does).
    func app(_ context: UpshiftRequestContext) -> (id: String, entry: CatalogSnapshot.Entry)? {
        guard let id = try? context.pathValue("app"), let entry = snapshot.app(id) else { return nil }
        return (id, entry)
    }

    /// Answers a parsed check; `known` is its question when the query index had it.
    private func check(
        _ checkRequest: CheckRequest, question known: CheckAnswerCache.Question? = nil, request: Request,
        app: (id: String, entry: CatalogSnapshot.Entry)?, context: UpshiftRequestContext
    ) throws -> Response {
        guard let (appId, entry) = app else {
            throw CatalogError.appNotFound(try context.pathValue("app"))  // 400 when the segment is not text
        }
        let now = clock.now()
        let interval = entry.timing.interval(platform: checkRequest.platform, now: now)
        let reusable = checkRequest.install == nil || !entry.timing.dependsOnInstall(platform: checkRequest.platform)
        let question = known ?? CheckAnswerCache.Question(checkRequest, app: appId, generation: entry.generation)
        let answer: CheckAnswerCache.Answer
        if reusable, let cached = answers.answer(question, interval: interval),
            let spelled = cached.spelling == checkRequest.version.text ? cached : cached.respelled(as: checkRequest.version.text)
        {
            cacheHits.increment()
            answer = spelled.staleness(for: checkRequest.install, now: now)
        } else {
            if reusable { cacheMisses.increment() }
            answer = try compute(checkRequest, entry: entry, now: now, interval: interval)
            // Kept unless another install could get another answer to the same question.
            if checkRequest.install == nil || !answer.dependsOnInstall {
                answers.store(answer, for: question)
                cacheBytes.set(Double(answers.bytes))
            }
        }
        decisions[Outcome(action: answer.action, reason: answer.reason)]?.increment()
        if let install = checkRequest.install, let installId = UUIDText.parse(install) {
            observe(answer, of: checkRequest, installId: installId, appId: appId, now: now)
        }
        if Self.matches(request.headers[.ifNoneMatch], etag: answer.etag) {
            var headers = answer.headers
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: answer.headers, body: .init(byteBuffer: answer.body))
    }

    /// Whether an `If-None-Match` names `etag` (strongly or weakly) or is `*`.
    static func matches(_ ifNoneMatch: String?, etag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        return ifNoneMatch.split(separator: ",").contains {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == etag || tag == "W/" + etag || tag == "*"
        }
    }

    /// Decides and encodes an answer (DESIGN.md section 4).
    private func compute(
        _ request: CheckRequest, entry: CatalogSnapshot.Entry, now: Date, interval: Int
    ) throws -> CheckAnswerCache.Answer {
        let decision = DecisionEngine.decide(request, catalog: entry.catalog, now: now)
        let catalog = entry.catalog
        // The release offered, when there is one: each install that reuses this answer gets its own staleness.
        let offered = decision.action == .none ? nil : decision.latestVersion.flatMap { latest in
            catalog.releases(for: request.platform).first { $0.version.text == latest }
        }.map { Staleness($0, policy: catalog.policy(for: request.platform), appId: catalog.app.id) }
        let body = try Self.encoder.encode(decision)
        let etag = "\"\(Self.fnv1a(body))\""
        return CheckAnswerCache.Answer(
            body: ByteBuffer(bytes: body), etag: etag,
            headers: [
                .contentType: "application/json", .eTag: etag,
                .cacheControl: "private, max-age=\(decision.checkAfterSeconds)",
            ],
            action: decision.action, reason: decision.reason, latestVersion: decision.latestVersion,
            interval: interval, dependsOnInstall: entry.timing.dependsOnInstall(platform: request.platform),
            installedVersion: decision.installedVersion, offered: offered, stalenessDays: decision.stalenessDays)
    }

    /// `a=1&install=…&b=2` → (`a=1&b=2`, the install id as sent). `clean` is false when the query may
    /// name `install` in another way (twice, or a percent-encoded name): then only a full parse answers.
    /// As the query's parameters split at `&` without the empty ones, then joined by `&` again without
    /// `install=…`, in one pass over the bytes (splitting and joining took 5 % of the server's CPU under
    /// checks with an install id each); a query without `install=` is returned as it is.
    static func splitInstall(_ query: String) -> (rest: String, install: Substring?, clean: Bool) {
        let bytes = query.utf8
        let (hasInstall, encodedName) = scan(bytes)
        guard hasInstall else { return (query, nil, !encodedName) }
        var install: Substring?
        var clean = !encodedName
        var rest = ""
        rest.reserveCapacity(bytes.count)
        var partStart = bytes.startIndex
        var index = bytes.startIndex
        while true {
            let atEnd = index == bytes.endIndex
            if atEnd || bytes[index] == UInt8(ascii: "&") {
                if partStart != index {
                    let part = query[partStart..<index]
                    if isInstall(part.utf8) {
                        if install != nil { clean = false }
                        // By bytes: a combining mark after `=` would join it in one Character.
                        install = query[bytes.index(partStart, offsetBy: installPrefix.count)..<index]
                    } else {
                        if !rest.isEmpty { rest += "&" }
                        rest += part
                    }
                }
                if atEnd { break }
                partStart = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        return (rest, install, clean)
    }

    private static let installPrefix = Array("install=".utf8)

    /// Whether a parameter is `install=…`.
    private static func isInstall(_ part: Substring.UTF8View) -> Bool {
        var index = part.startIndex
        for byte in installPrefix {
            guard index != part.endIndex, part[index] == byte else { return false }
            index = part.index(after: index)
        }
        return true
    }

    /// Whether a parameter of the query is `install=…`, and whether a parameter name holds a `%` (it could
    /// decode to `install`): a byte scan without allocation (Foundation's `contains` goes through NSString
    /// and showed in the profile of the check).
    private static func scan(_ bytes: String.UTF8View) -> (hasInstall: Bool, encodedName: Bool) {
        var hasInstall = false
        var encodedName = false
        var inName = true
        var matched = 0  // bytes of `install=` matched from the start of this parameter
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "&"):
                inName = true
                matched = 0
                continue
            case UInt8(ascii: "%") where inName:
                encodedName = true
            case UInt8(ascii: "="):
                inName = false
            default:
                break
            }
            if matched >= 0 {
                if byte == installPrefix[matched] {
                    matched += 1
                    if matched == installPrefix.count {
                        hasInstall = true
                        matched = -1
                    }
                } else {
                    matched = -1
                }
            }
        }
        return (hasInstall, encodedName)
    }

    /// The fields of a `POST` body: strings, `build` an integer; `null` is absent; members this endpoint
    /// does not read are ignored.
    static func fields(_ body: JSONValue) throws -> [String: String] {
        guard let object = body.objectValue else {
            throw ProblemDetails.badRequest("the body must be a JSON object of check fields", field: "body")
        }
        var fields: [String: String] = [:]
        for name in fieldNames {
            switch object[name] {
            case nil, .null?: continue
            case .string(let text)? where name != "build": fields[name] = text
            case .number(let number)? where name == "build":
                guard let build = number.integer(in: 0...EventValidator.maximumBuild) else {
                    throw ProblemDetails.badRequest("build must be an integer from 0 to \(EventValidator.maximumBuild)", field: name)
                }
                fields[name] = String(build)
            default:
                throw ProblemDetails.badRequest("\(name) must be \(name == "build" ? "an integer" : "a string")", field: name)
            }
        }
        return fields
    }

    static let fieldNames = ["platform", "version", "build", "os", "install", "locale", "channel", "previous"]

    /// Records a `checked` event; never waits, and counts what it could not keep.
    private func observe(
        _ decision: CheckAnswerCache.Answer, of request: CheckRequest, installId: UUID, appId: String, now: Date
    ) {
        var data = EventData()
        data.add("action", decision.action.rawValue)
        data.add("reason", decision.reason.rawValue)
        data.add("latestVersion", decision.latestVersion)
        data.add("build", request.build)
        data.add("osVersion", request.os?.text)
        data.add("locale", request.locale)
        data.add("channel", request.channel.rawValue)
        let event = Event(
            id: UUIDText.random(), type: .checked, occurredAt: now, appId: appId, installId: installId, platform: request.platform,
            appVersion: request.version.text, data: data.json)
        observed.increment()
        writer.offer([event], limit: observationBuffer) { [dropped, droppedLog, logger] result in
            if case .failure(let error) = result {
                dropped.increment()
                // In an outage every check drops one: the first is logged, then a count every 10 s.
                droppedLog.occurred { count in
                    logger.warning(
                        "check observations dropped",
                        metadata: ["count": "\(count)", "reason": "\(error)", "app.id": "\(appId)", "every": "\(droppedLog.interval)"])
                }
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
            guard let value = TextRules.integer(text, in: 0...EventValidator.maximumBuild) else {
                throw ProblemDetails.badRequest("build must be an integer from 0 to \(EventValidator.maximumBuild)", field: "build")
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
        var locale: String?
        if let text = fields["locale"] {
            guard let tag = EventValidator.localeTag(text) else {
                throw ProblemDetails.badRequest("locale is not a locale tag", field: "locale")
            }
            locale = tag
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
            locale: locale, channel: channel, previous: try version("previous"))
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

