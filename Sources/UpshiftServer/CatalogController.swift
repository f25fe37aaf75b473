import Foundation
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// The admin API of DESIGN.md section 4: apps, releases, policies and history. Writes go through
/// `CatalogStore`, the same code the CLI uses.
struct CatalogController: Sendable {
    let store: CatalogStore
    let authenticator: KeyAuthenticator
    let clock: any WallClock
    /// Reloads this instance's check snapshot, so that a write is visible here as soon as it is
    /// answered (other instances follow on NOTIFY).
    let afterWrite: @Sendable () async -> Void
    /// Catalog bodies are small; anything larger is refused.
    static let maximumBody = 256 * 1024

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.post("/v1/apps") { request, context in
            let key = try authenticator.authorize(request, app: nil, write: true)
            let body = try await json(request)
            let app = try CatalogInput.app(body)
            let created = try await catalog {
                try await store.createApp(app, actor: key.actor, reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try JSONResponse.make(created, status: .created)
        }
        router.get("/v1/apps/:app") { request, context in
            let (_, appId) = try scope(request, context, write: false)
            try QueryParameters(request).refuseUnknown(allowed: [])
            guard let app = try await store.apps(id: appId).first else { throw ProblemDetails.notFound("no app \(appId)") }
            return try JSONResponse.make(app)
        }
        router.post("/v1/apps/:app/releases") { request, context in
            let (key, appId) = try scope(request, context, write: true)
            let body = try await json(request)
            let release = try CatalogInput.release(body)
            let write = try await catalog {
                try await store.addRelease(
                    appId: appId, release, actor: key.actor, reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try revisioned(write, status: .created)
        }
        router.get("/v1/apps/:app/releases") { request, context in
            let (_, appId) = try scope(request, context, write: false)
            let query = try QueryParameters(request)
            try query.refuseUnknown(allowed: ["platform"])
            if let platform = query["platform"], !EventValidator.isPlatform(platform) {
                throw ProblemDetails.badRequest("platform: lowercase letters, digits, _ or -, at most 32", field: "platform")
            }
            guard let catalog = try await store.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
            let platforms = query["platform"].map { [$0] } ?? catalog.releases.keys.sorted()
            return try JSONResponse.make(ReleaseList(releases: platforms.flatMap { catalog.releases(for: $0) }), encoder: CatalogCoding.encoder())
        }
        router.get("/v1/apps/:app/releases/:platform/:version") { request, context in
            let (_, appId) = try scope(request, context, write: false)
            let platform = try context.pathPlatform()
            let version = try context.pathVersion()
            try QueryParameters(request).refuseUnknown(allowed: [])
            guard let catalog = try await store.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
            guard let release = catalog.releases(for: platform).first(where: { $0.version == version }) else {
                throw ProblemDetails.notFound("no release \(version.text) of \(appId) on \(platform)")
            }
            return try revisioned(CatalogWrite(value: release, revision: release.revision, warnings: []), status: .ok)
        }
        router.patch("/v1/apps/:app/releases/:platform/:version") { request, context in
            let (key, appId) = try scope(request, context, write: true)
            let platform = try context.pathPlatform()
            let version = try context.pathVersion()
            let expected = try ifMatch(request)
            let body = try await json(request)
            _ = try CatalogInput.releasePatch(body, to: Release(platform: platform, version: version, releasedAt: Date()))
            let write = try await catalog {
                try await store.updateRelease(
                    appId: appId, platform: platform, version: version, expectedRevision: expected, actor: key.actor,
                    reason: try CatalogInput.reason(body), now: clock.now()
                ) { release in
                    do throws(FieldError) { return try CatalogInput.releasePatch(body, to: release) } catch {
                        throw CatalogError.invalid(error)
                    }
                }
            }
            return try revisioned(write, status: .ok)
        }
        router.get("/v1/apps/:app/policies/:platform") { request, context in
            let (_, appId) = try scope(request, context, write: false)
            let platform = try context.pathPlatform()
            try QueryParameters(request).refuseUnknown(allowed: [])
            guard let catalog = try await store.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
            let policy = catalog.policy(for: platform)
            return try revisioned(CatalogWrite(value: policy, revision: policy.revision, warnings: []), status: .ok)
        }
        router.put("/v1/apps/:app/policies/:platform") { request, context in
            let (key, appId) = try scope(request, context, write: true)
            let platform = try context.pathPlatform()
            let expected = try ifMatch(request)
            let body = try await json(request)
            let policy = try CatalogInput.policy(body)
            let write = try await catalog {
                try await store.replacePolicy(
                    appId: appId, platform: platform, policy, expectedRevision: expected, actor: key.actor,
                    reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try revisioned(write, status: .ok)
        }
        router.get("/v1/apps/:app/history") { request, context in
            let (_, appId) = try scope(request, context, write: false)
            let query = try QueryParameters(request)
            try query.refuseUnknown(allowed: ["limit", "before"])
            let limit = try query.integer("limit", default: 50, range: 1...500)
            let before = try query["before"].map { _ in try query.integer("before", default: 0, range: 1...Int(Int32.max)) }
            guard try await !store.apps(id: appId).isEmpty else { throw ProblemDetails.notFound("no app \(appId)") }
            // One more than asked tells whether an older page exists.
            let entries = try await store.history(appId: appId, before: before, limit: limit + 1)
            let page = Array(entries.prefix(limit))
            let next = entries.count > limit ? page.last.map(\.version) : nil
            return try JSONResponse.make(History(entries: page, nextBefore: next), encoder: CatalogCoding.encoder())
        }
    }

    /// The token (`401`), the path's app (`404` for an id no app can have), the token's right to it (`403`).
    private func scope(_ request: Request, _ context: UpshiftRequestContext, write: Bool) throws -> (APIKey, String) {
        let key = try authenticator.authenticate(request)
        let appId = try context.appId()
        return (try authenticator.permit(key, app: appId, write: write), appId)
    }

    // MARK: Helpers

    struct ReleaseList: Encodable {
        var releases: [Release]
    }

    struct History: Encodable {
        var entries: [CatalogHistoryEntry]
        /// Pass as `before` for the next (older) page; absent on the last page.
        var nextBefore: Int?
    }

    struct Revisioned<Value: Encodable & Sendable>: Encodable {
        var value: Value
        var warnings: [String]

        func encode(to encoder: any Encoder) throws {
            try value.encode(to: encoder)
            if !warnings.isEmpty {
                var container = encoder.container(keyedBy: WarningKey.self)
                try container.encode(warnings, forKey: .warnings)
            }
        }

        enum WarningKey: String, CodingKey { case warnings }
    }

    /// A value with its revision as `ETag: "n"`, and warnings in the body when there are any.
    private func revisioned<Value: Encodable & Sendable>(_ write: CatalogWrite<Value>, status: HTTPResponse.Status) throws -> Response {
        try JSONResponse.make(
            Revisioned(value: write.value, warnings: write.warnings), status: status,
            headers: [.eTag: "\"\(write.revision)\""], encoder: CatalogCoding.encoder())
    }

    /// `If-Match: "n"`: `428` without it.
    private func ifMatch(_ request: Request) throws -> Int {
        guard let header = request.headers[.ifMatch] else {
            throw ProblemDetails(
                .preconditionRequired, type: "urn:upshift:problem:if-match-required", title: "If-Match required",
                detail: "send If-Match with the ETag you read (\"0\" for a policy never set)")
        }
        // `"n"` or `W/"n"`, n a revision without leading zeros and of at most 18 digits, as the spec's
        // pattern says (no revision comes near it).
        var tag = Substring(header.trimmingCharacters(in: .whitespaces))
        if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
        let digits = tag.dropFirst().dropLast()
        guard tag.count >= 3, tag.hasPrefix("\""), tag.hasSuffix("\""), digits == "0" || !digits.hasPrefix("0"),
            let revision = TextRules.integer(digits, in: 0...999_999_999_999_999_999)
        else {
            throw ProblemDetails.badRequest("If-Match must be an ETag such as \"3\"", field: "If-Match")
        }
        return revision
    }

    /// A JSON body of at most 256 KiB, read strictly (``JSONParser``); a problem names the member at fault.
    private func json(_ request: Request) async throws -> JSONValue {
        try request.requireContentType("application/json")
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBody)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("at most 256 KiB")
        }
        return try JSONParser.parse(Array(body.readableBytesView))
    }

    /// Runs a store call and reloads this instance's snapshot after it (its errors map in ProblemDetails).
    private func catalog<T>(_ body: () async throws -> T) async throws -> T {
        let result = try await body()
        await afterWrite()
        return result
    }
}
