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
            let key = try await authorize(request, app: nil, write: true)
            let body = try await json(request)
            let app = try validated { () throws(FieldError) in try CatalogInput.app(body) }
            let created = try await catalog {
                try await store.createApp(app, actor: key.actor, reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try JSONResponse.make(created, status: .created)
        }
        router.get("/v1/apps/:app") { request, context in
            let appId = try context.parameters.require("app")
            _ = try await authorize(request, app: appId, write: false)
            guard let app = try await store.apps(id: appId).first else { throw ProblemDetails.notFound("no app \(appId)") }
            return try JSONResponse.make(app)
        }
        router.post("/v1/apps/:app/releases") { request, context in
            let appId = try context.parameters.require("app")
            let key = try await authorize(request, app: appId, write: true)
            let body = try await json(request)
            let release = try validated { () throws(FieldError) in try CatalogInput.release(body) }
            let write = try await catalog {
                try await store.addRelease(
                    appId: appId, release, actor: key.actor, reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try revisioned(write, status: .created)
        }
        router.get("/v1/apps/:app/releases") { request, context in
            let appId = try context.parameters.require("app")
            _ = try await authorize(request, app: appId, write: false)
            guard let catalog = try await store.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
            let platform = request.uri.queryParameters["platform"].map(String.init)
            let platforms = platform.map { [$0] } ?? catalog.releases.keys.sorted()
            return try JSONResponse.make(ReleaseList(releases: platforms.flatMap { catalog.releases(for: $0) }), encoder: CatalogCoding.encoder())
        }
        router.patch("/v1/apps/:app/releases/:platform/:version") { request, context in
            let appId = try context.parameters.require("app")
            let platform = try context.parameters.require("platform")
            let key = try await authorize(request, app: appId, write: true)
            let versionText = try context.parameters.require("version").removingPercentEncoding ?? ""
            guard let version = Version(versionText) else {
                throw ProblemDetails.badRequest("\(versionText) is not a valid version", field: "version")
            }
            let expected = try ifMatch(request)
            let body = try await json(request)
            _ = try validated { () throws(FieldError) in try CatalogInput.releasePatch(body, to: Release(platform: platform, version: version, releasedAt: Date())) }
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
            let appId = try context.parameters.require("app")
            let platform = try context.parameters.require("platform")
            _ = try await authorize(request, app: appId, write: false)
            guard let catalog = try await store.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
            let policy = catalog.policy(for: platform)
            return try revisioned(CatalogWrite(value: policy, revision: policy.revision, warnings: []), status: .ok)
        }
        router.put("/v1/apps/:app/policies/:platform") { request, context in
            let appId = try context.parameters.require("app")
            let platform = try context.parameters.require("platform")
            let key = try await authorize(request, app: appId, write: true)
            guard EventValidator.isPlatform(platform) else {
                throw ProblemDetails.badRequest("\(platform) is not a platform name", field: "platform")
            }
            let expected = try ifMatch(request)
            let body = try await json(request)
            let policy = try validated { () throws(FieldError) in try CatalogInput.policy(body) }
            let write = try await catalog {
                try await store.replacePolicy(
                    appId: appId, platform: platform, policy, expectedRevision: expected, actor: key.actor,
                    reason: try CatalogInput.reason(body), now: clock.now())
            }
            return try revisioned(write, status: .ok)
        }
        router.get("/v1/apps/:app/history") { request, context in
            let appId = try context.parameters.require("app")
            _ = try await authorize(request, app: appId, write: false)
            let limit = try request.integerParameter("limit", default: 50, range: 1...500)
            let before = try request.uri.queryParameters["before"].map { _ in try request.integerParameter("before", default: 0, range: 1...Int(Int32.max)) }
            guard try await !store.apps(id: appId).isEmpty else { throw ProblemDetails.notFound("no app \(appId)") }
            // One more than asked tells whether an older page exists.
            let entries = try await store.history(appId: appId, before: before, limit: limit + 1)
            let page = Array(entries.prefix(limit))
            let next = entries.count > limit ? page.last.map(\.version) : nil
            return try JSONResponse.make(History(entries: page, nextBefore: next), encoder: CatalogCoding.encoder())
        }
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

    private func authorize(_ request: Request, app: String?, write: Bool) async throws -> APIKey {
        try await authenticator.authorize(request, app: app, write: write)
    }

    /// `If-Match: "n"`: `428` without it.
    private func ifMatch(_ request: Request) throws -> Int {
        guard let header = request.headers[.ifMatch] else {
            throw ProblemDetails(
                .preconditionRequired, type: "urn:upshift:problem:if-match-required", title: "If-Match required",
                detail: "send If-Match with the ETag you read (\"0\" for a policy never set)")
        }
        let tag = header.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "W/", with: "")
        guard tag.count >= 3, tag.hasPrefix("\""), tag.hasSuffix("\""), let revision = Int(tag.dropFirst().dropLast()) else {
            throw ProblemDetails.badRequest("If-Match must be an ETag such as \"3\"", field: "If-Match")
        }
        return revision
    }

    private func json(_ request: Request) async throws -> JSONValue {
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBody)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("at most 256 KiB")
        }
        guard let value = try? JSONValue.parse(Data(body.readableBytesView)) else {
            throw ProblemDetails.badRequest("the body is not valid JSON", field: "body")
        }
        return value
    }

    private func validated<T>(_ body: () throws(FieldError) -> T) throws -> T {
        do {
            return try body()
        } catch {
            throw ProblemDetails.invalidField(error)
        }
    }

    /// Runs a store call, turning catalog errors into their problems.
    private func catalog<T>(_ body: () async throws -> T) async throws -> T {
        do {
            let result = try await body()
            await afterWrite()
            return result
        } catch let error as CatalogError {
            throw ProblemDetails.catalog(error)
        } catch let error as FieldError {
            throw ProblemDetails.invalidField(error)
        }
    }
}

extension ProblemDetails {
    static func invalidField(_ error: FieldError) -> ProblemDetails {
        ProblemDetails(
            .badRequest, type: "urn:upshift:problem:invalid-field", title: "Invalid field", detail: error.description,
            field: error.field)
    }

    static func catalog(_ error: CatalogError) -> ProblemDetails {
        switch error {
        case .appNotFound, .releaseNotFound: .notFound(error.description)
        case .appExists, .releaseExists:
            ProblemDetails(.conflict, type: "urn:upshift:problem:exists", title: "Already exists", detail: error.description)
        case .stale:
            ProblemDetails(
                .preconditionFailed, type: "urn:upshift:problem:stale", title: "Stale revision",
                detail: error.description + "; read it again and retry")
        case .invalid(let field): .invalidField(field)
        }
    }
}
