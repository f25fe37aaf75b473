import Hummingbird
import UpshiftCore
import UpshiftStore

extension CatalogController {
    struct RuleList: Encodable {
        var rules: [Rule]
    }

    /// `GET /v1/apps/{app}/rules[?platform=]`: every rule of the app, by platform and id.
    @Sendable func rules(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["platform"])
        let platform = try query["platform"].map { try Platform($0) }
        let app = try await context.app(in: store)
        let platforms = platform.map { [$0] } ?? app.rules.keys.sorted()
        return try JSONResponse.make(RuleList(rules: platforms.flatMap(app.rules(for:))), encoder: CatalogCoding.encoder())
    }

    /// `GET /v1/apps/{app}/rules/{platform}/{rule}`, with its revision as `ETag`.
    @Sendable func rule(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (platform, id) = try context.pathRule()
        try QueryParameters(request).refuseUnknown(allowed: [])
        guard let rule = try await context.app(in: store).rules(for: platform).first(where: { $0.id == id }) else {
            throw CatalogError.ruleNotFound("\(platform) \(id)")
        }
        return try revisioned(CatalogWrite(value: rule, revision: rule.revision, warnings: []), status: .ok)
    }

    struct RecordList: Encodable {
        var records: [RuleRecord]
    }

    /// `GET /v1/apps/{app}/rules/{platform}/{rule}/records[?limit=]`: what the rule's evaluation recorded,
    /// newest first (kept after the rule is removed).
    @Sendable func ruleRecords(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (platform, id) = try context.pathRule()
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["limit"])
        let limit = try query.integer("limit", default: 50, range: 1...500)
        let app = try await context.app(in: store)
        let found = try await records.records(appId: app.app.id, platform: platform, ruleId: id, limit: limit)
        return try JSONResponse.make(RecordList(records: found), encoder: CatalogCoding.encoder())
    }

    /// `PUT /v1/apps/{app}/rules/{platform}/{rule}` with `If-Match` (`"0"` creates it).
    @Sendable func putRule(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let (platform, id) = try context.pathRule()
        let expected = try ifMatch(request)
        let body = try await Self.json(request)
        let reason = try CatalogInput.reason(body)
        // `reason` is the write's, and `revision` may be sent back as a read has it (`If-Match` counts).
        var fields = body.objectValue
        fields?["reason"] = nil
        fields?["revision"] = nil
        let definition = try RuleDefinition(json: fields.map(JSONValue.object) ?? body)
        let write = try await written {
            try await store.replaceRule(
                appId: appId, platform: platform, id: id, definition, expectedRevision: expected, actor: identity.key.actor,
                reason: reason, now: clock.now())
        }
        return try revisioned(write, status: .ok)
    }

    /// `DELETE /v1/apps/{app}/rules/{platform}/{rule}` with `If-Match`: `204`.
    @Sendable func deleteRule(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let (platform, id) = try context.pathRule()
        let expected = try ifMatch(request)
        try QueryParameters(request).refuseUnknown(allowed: [])
        try await written {
            try await store.removeRule(
                appId: appId, platform: platform, id: id, expectedRevision: expected, actor: identity.key.actor,
                reason: nil, now: clock.now())
        }
        return Response(status: .noContent)
    }
}

extension UpshiftRequestContext {
    /// The `{platform}` and `{rule}` of the path: `400` naming `rule` when it is no rule id.
    func pathRule() throws -> (Platform, String) {
        let platform = try pathPlatform()
        let id = try pathValue("rule")
        guard RuleDefinition.isID(id) else {
            throw ProblemDetails.badRequest("rule: '\(id)' is not a rule id (^[a-z0-9][a-z0-9-]{0,62}$)", field: "rule")
        }
        return (platform, id)
    }
}
