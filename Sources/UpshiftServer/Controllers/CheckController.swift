import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Metrics
import UpshiftCore
import UpshiftStore

/// `GET` and `POST /v1/apps/{app}/check` (docs/ARCHITECTURE.md, "The check path"): answered from the
/// in-memory catalog snapshot, never from the database; observations (`checked` events) are queued without
/// waiting. The feeds for existing client libraries share its limiter and cache (``UpdateFeedController``).
struct CheckController: Sendable {
    let snapshot: CatalogSnapshot
    let clock: any WallClock
    let limiter: RateLimiter
    let trustedProxies: Set<String>
    let answers: CheckAnswerCache
    let observations: CheckObservations
    let feeds: UpdateFeedController
    /// `upshift_check_decisions_total{action,reason}`, made once for every pair.
    let decisions: [Outcome: Counter]
    /// `upshift_check_cache_lookups_total{result}`: answers that could be reused, found (`hit`) or computed (`miss`).
    let cacheHits: Counter
    let cacheMisses: Counter

    init(
        snapshot: CatalogSnapshot, writer: IngestionWriter, clock: any WallClock, settings: CheckSettings,
        trustedProxies: Set<String>, metrics: any MetricsFactory, logger: Logger
    ) {
        self.snapshot = snapshot
        self.clock = clock
        self.limiter = RateLimiter(settings.ratePerClient, name: "check", metrics: metrics)
        self.trustedProxies = trustedProxies
        self.answers = CheckAnswerCache(byteLimit: settings.cacheBytes, metrics: metrics)
        self.observations = CheckObservations(
            writer: writer, buffer: settings.observationBuffer, metrics: metrics, logger: logger)
        self.feeds = UpdateFeedController(snapshot: snapshot, clock: clock, answers: answers)
        cacheHits = Counter(label: "upshift_check_cache_lookups_total", dimensions: [("result", "hit")], factory: metrics)
        cacheMisses = Counter(label: "upshift_check_cache_lookups_total", dimensions: [("result", "miss")], factory: metrics)
        var decisions: [Outcome: Counter] = [:]
        for action in CheckAction.allCases {
            for reason in CheckReason.allCases {
                decisions[Outcome(action: action, reason: reason)] = Counter(
                    label: "upshift_check_decisions_total",
                    dimensions: [("action", action.rawValue), ("reason", reason.rawValue)], factory: metrics)
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
            .get("appcast.xml", use: feeds.appcast)
            .get("versions.plist", use: feeds.versionsPlist)
            .get("lookup", use: feeds.lookup)
            .get(":country/lookup", use: feeds.lookup)
        return routes
    }

    /// `GET …/check?platform=&version=…`: a query seen before (but for its install id) is not parsed again.
    @Sendable func checkQuery(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = request.uri.query ?? ""
        let split = CheckQueryIndex.splitInstall(query)
        let target = snapshot.app(in: context)
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
            checkRequest = try CheckParameters.parse(QueryParameters(query: query).values)
            if split.clean, let target {
                var indexed = checkRequest
                indexed.install = nil
                let asked = CheckAnswerCache.Question(indexed, app: target.id, generation: target.entry.generation)
                answers.store(indexed, question: asked, query: split.rest)
                question = asked
            }
        }
        return try check(checkRequest, question: question, request: request, app: target, context: context)
    }

    /// `POST …/check` with the same fields as a JSON object.
    @Sendable func checkBody(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let fields = try await CheckParameters.fields(of: request)
        return try check(try CheckParameters.parse(fields), request: request, app: snapshot.app(in: context), context: context)
    }

    /// Answers a parsed check; `known` is its question when the query index had it.
    private func check(
        _ checkRequest: CheckRequest, question known: CheckAnswerCache.Question? = nil, request: Request,
        app: (id: AppID, entry: CatalogSnapshot.Entry)?, context: UpshiftRequestContext
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
            }
        }
        decisions[Outcome(action: answer.action, reason: answer.reason)]?.increment()
        if let install = checkRequest.install, let installId = UUIDText.parse(install) {
            observations.record(answer, of: checkRequest, installId: installId, appId: appId, now: now)
        }
        return EntityTag.response(to: request, etag: answer.etag, headers: answer.headers, body: answer.body)
    }

    /// Decides and encodes an answer (docs/ARCHITECTURE.md, "The decision rules").
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
        let etag = "\"\(EntityTag.fnv1a(body))\""
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

    static let encoder = CatalogCoding.encoder()
}
