import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// Webhook subscriptions of an app (docs/OPERATIONS.md, "Webhooks"), with an admin token: a URL may carry
/// a receiver's own secret, and a subscription sends what the catalog decides to it.
///
/// - `POST /v1/apps/{app}/webhooks` `{"url", "kinds"}`: `201` with the subscription and its `secret`, shown
///   this once; `GET …/webhooks` lists them, `GET`/`DELETE …/webhooks/{id}` reads or removes one.
/// - `POST …/webhooks/{id}/rotate`: a new secret (the old one signs too for 24 h); `POST …/enable` enables a
///   subscription disabled after a day of failures; `POST …/test` queues a `webhook.test` delivery.
/// - `GET …/webhooks/{id}/deliveries[?limit=]`: the newest deliveries with their attempts.
struct WebhookController {
    let store: WebhookStore
    let snapshot: CatalogSnapshot
    let settings: WebhookSettings
    let clock: any WallClock

    /// The routes, relative to `/v1/apps/{app}`.
    func routes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        let admin = routes.add(middleware: authentication).add(middleware: RequireAccess(.write))
        admin.post("webhooks", use: create)
        admin.get("webhooks", use: list)
        admin.get("webhooks/:webhook", use: show)
        admin.delete("webhooks/:webhook", use: delete)
        admin.post("webhooks/:webhook/rotate", use: rotate)
        admin.post("webhooks/:webhook/enable", use: enable)
        admin.post("webhooks/:webhook/test", use: test)
        admin.get("webhooks/:webhook/deliveries", use: deliveries)
        return routes
    }

    @Sendable func create(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let app = try context.knownApp(in: snapshot)
        let body = try await CatalogController.json(request)
        guard let fields = body.objectValue else { throw ProblemDetails.badRequest("the body must be a JSON object") }
        if let unknown = fields.keys.sorted().first(where: { !["url", "kinds", "format", "thresholds"].contains($0) }) {
            throw ProblemDetails.badRequest(
                "\(unknown) is not a field of a webhook: url, kinds, format and thresholds are", field: unknown)
        }
        var format = WebhookFormat.json
        if let value = fields["format"] {
            guard let text = value.stringValue, let named = WebhookFormat(rawValue: text) else {
                throw ProblemDetails.badRequest("format must be json or slack", field: "format")
            }
            format = named
        }
        guard let url = fields["url"]?.stringValue else {
            throw ProblemDetails.badRequest("url is required: an https URL such as https://hooks.example.com/upshift", field: "url")
        }
        let kinds = try Self.kinds(fields["kinds"])
        let thresholds = try Self.thresholds(fields["thresholds"], kinds: kinds)
        let (webhook, secret) = try await Self.subscribe(
            app, url: url, kinds: kinds, format: format, thresholds: thresholds, store: store, settings: settings, now: clock.now())
        return try JSONResponse.make(WebhookBody(webhook, secret: secret), status: .created)
    }

    /// Checks `url` as a target (`400` naming `url`) and creates the subscription (`400` past the limit): the
    /// API's creation and the dashboard's.
    static func subscribe(
        _ app: AppID, url: String, kinds: [WebhookKind], format: WebhookFormat, thresholds: [Double], store: WebhookStore,
        settings: WebhookSettings, now: Date
    ) async throws -> (Webhook, secret: String) {
        do {
            try await settings.check(url)
        } catch {
            throw ProblemDetails.badRequest("\(error)", field: "url")
        }
        do {
            return try await store.create(app: app, url: url, kinds: kinds, format: format, thresholds: thresholds, now: now)
        } catch WebhookStore.Failure.tooMany {
            throw ProblemDetails.badRequest("an app has at most \(WebhookStore.perApp) webhooks: remove one first")
        }
    }

    /// The kinds of a request: a non-empty array of distinct known kinds.
    static func kinds(_ value: JSONValue?) throws -> [WebhookKind] {
        let known = WebhookKind.allCases.map(\.rawValue).joined(separator: ", ")
        guard let items = value?.arrayValue, !items.isEmpty, items.count <= WebhookKind.allCases.count else {
            throw ProblemDetails.badRequest("kinds must be a non-empty array of distinct kinds: \(known)", field: "kinds")
        }
        var kinds: [WebhookKind] = []
        for item in items {
            guard let text = item.stringValue, let kind = WebhookKind(rawValue: text) else {
                throw ProblemDetails.badRequest("kinds holds an unknown kind: the kinds are \(known)", field: "kinds")
            }
            guard !kinds.contains(kind) else {
                throw ProblemDetails.badRequest("kinds names \(kind.rawValue) twice", field: "kinds")
            }
            kinds.append(kind)
        }
        return kinds
    }

    /// The thresholds of a request (``AdoptionCrossing/thresholds(_:kinds:)``): an array of numbers.
    static func thresholds(_ value: JSONValue?, kinds: [WebhookKind]) throws -> [Double] {
        // Anything but an array is refused as an empty one; an item that is not a number as its JSON.
        let literals: [String]? = value.map { value in
            value.arrayValue?.map { item -> String in
                if case .number(let number) = item { return number.literal }
                return item.description
            } ?? []
        }
        do {
            return try AdoptionCrossing.thresholds(literals, kinds: kinds)
        } catch let error as AdoptionCrossing.Refusal {
            throw ProblemDetails.badRequest(error.description, field: "thresholds")
        }
    }

    struct WebhookList: Encodable {
        var webhooks: [WebhookBody]
    }

    @Sendable func list(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let app = try context.knownApp(in: snapshot)
        return try JSONResponse.make(WebhookList(webhooks: try await store.list(app: app).map { WebhookBody($0) }))
    }

    @Sendable func show(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let (app, id) = try subscription(context)
        guard let webhook = try await store.webhook(app: app, id: id) else { throw notFound(app, id) }
        return try JSONResponse.make(WebhookBody(webhook))
    }

    @Sendable func delete(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let (app, id) = try subscription(context)
        guard try await store.delete(app: app, id: id) else { throw notFound(app, id) }
        return Response(status: .noContent)
    }

    @Sendable func rotate(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let (app, id) = try subscription(context)
        do {
            let (webhook, secret) = try await store.rotate(app: app, id: id, now: clock.now())
            return try JSONResponse.make(WebhookBody(webhook, secret: secret))
        } catch WebhookStore.Failure.notFound {
            throw notFound(app, id)
        }
    }

    @Sendable func enable(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let (app, id) = try subscription(context)
        do {
            return try JSONResponse.make(WebhookBody(try await store.enable(app: app, id: id)))
        } catch WebhookStore.Failure.notFound {
            throw notFound(app, id)
        }
    }

    struct Queued: Encodable {
        var delivery: String
    }

    @Sendable func test(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try QueryParameters(request).refuseUnknown(allowed: [])
        let (app, id) = try subscription(context)
        do {
            let delivery = try await store.test(app: app, id: id, now: clock.now())
            return try JSONResponse.make(Queued(delivery: delivery.uuidString.lowercased()), status: .accepted)
        } catch WebhookStore.Failure.notFound {
            throw notFound(app, id)
        }
    }

    struct DeliveryList: Encodable {
        var deliveries: [DeliveryBody]
    }

    @Sendable func deliveries(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["limit"])
        let limit = try query.integer("limit", default: 50, range: 1...500)
        let (app, id) = try subscription(context)
        guard try await store.webhook(app: app, id: id) != nil else { throw notFound(app, id) }
        let found = try await store.deliveries(app: app, webhook: id, limit: limit)
        return try JSONResponse.make(DeliveryList(deliveries: found.map(DeliveryBody.init)))
    }


    private func subscription(_ context: UpshiftRequestContext) throws -> (AppID, UUID) {
        let app = try context.knownApp(in: snapshot)
        let text = try context.pathValue("webhook")
        guard let id = UUID(uuidString: text) else {
            throw ProblemDetails.badRequest(
                "webhook must be a webhook id: a UUID such as 9f1c0b6e-3d2a-4c5b-8e7f-0a1b2c3d4e5f", field: "webhook")
        }
        return (app, id)
    }

    private func notFound(_ app: AppID, _ id: UUID) -> ProblemDetails {
        ProblemDetails.notFound("no webhook \(id.uuidString.lowercased()) of app \(app)")
    }
}

/// A subscription as the API shows it; `secret` only in the answers that make one.
struct WebhookBody: Encodable {
    let id: String
    let url: String
    let kinds: [String]
    let format: String
    let thresholds: [Double]
    let enabled: Bool
    let disabledReason: String?
    let failingSince: String?
    let previousSecretUntil: String?
    let createdAt: String
    let secret: String?

    init(_ webhook: Webhook, secret: String? = nil) {
        id = webhook.id.uuidString.lowercased()
        url = webhook.url
        kinds = webhook.kinds.map(\.rawValue)
        format = webhook.format.rawValue
        thresholds = webhook.thresholds
        enabled = webhook.enabled
        disabledReason = webhook.disabledReason
        failingSince = webhook.failingSince.map(Timestamp.format)
        previousSecretUntil = webhook.previousSecretUntil.map(Timestamp.format)
        createdAt = Timestamp.format(webhook.createdAt)
        self.secret = secret
    }
}

/// A delivery as the API shows it.
struct DeliveryBody: Encodable {
    struct Attempt: Encodable {
        let attempt: Int
        let at: String
        let durationMilliseconds: Int
        let status: Int?
        let error: String?
    }

    let id: String
    let kind: String
    let state: String
    let createdAt: String
    let nextAttemptAt: String?
    let attempts: [Attempt]

    init(_ delivery: WebhookDelivery) {
        id = delivery.id.uuidString.lowercased()
        kind = delivery.kind
        state = delivery.state
        createdAt = Timestamp.format(delivery.createdAt)
        nextAttemptAt = delivery.nextAt.map(Timestamp.format)
        attempts = delivery.attempts.map {
            Attempt(attempt: $0.attempt, at: Timestamp.format($0.at), durationMilliseconds: $0.durationMilliseconds,
                    status: $0.status, error: $0.error)
        }
    }
}
