import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

extension CatalogController {
    struct ReleaseList: Encodable {
        var releases: [Release]
    }

    /// `POST /v1/apps/{app}/releases`
    @Sendable func addRelease(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let body = try await Self.json(request)
        let now = clock.now()
        let release = try CatalogInput.release(body, now: now)
        let reason = try CatalogInput.reason(body)
        let write = try await written {
            try await store.addRelease(appId: appId, release, actor: identity.key.actor, reason: reason, now: now)
        }
        return try revisioned(write, status: .created)
    }

    /// `GET /v1/apps/{app}/releases[?platform=]`
    @Sendable func releases(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["platform"])
        let platform = try query["platform"].map { try Platform($0) }
        let catalog = try await context.app(in: store)
        let platforms = platform.map { [$0] } ?? catalog.releases.keys.sorted()
        return try JSONResponse.make(
            ReleaseList(releases: platforms.flatMap { catalog.releases(for: $0) }), encoder: CatalogCoding.encoder())
    }

    /// `GET /v1/apps/{app}/releases/{platform}/{version}`, with its revision as `ETag`.
    @Sendable func release(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let platform = try context.pathPlatform()
        let version = try context.pathVersion()
        try QueryParameters(request).refuseUnknown(allowed: [])
        let catalog = try await context.app(in: store)
        guard let release = catalog.releases(for: platform).first(where: { $0.version == version }) else {
            throw CatalogError.releaseNotFound("\(version.text) of \(catalog.app.id) on \(platform)")
        }
        return try revisioned(CatalogWrite(value: release, revision: release.revision, warnings: []), status: .ok)
    }

    /// `PATCH /v1/apps/{app}/releases/{platform}/{version}` with `If-Match`.
    @Sendable func patchRelease(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let platform = try context.pathPlatform()
        let version = try context.pathVersion()
        let expected = try ifMatch(request)
        let body = try await Self.json(request)
        // The body is checked before the store is asked, so that a bad field is a 400 whatever the revision.
        let now = clock.now()
        try CatalogInput.checkReleasePatch(body, platform: platform, version: version, now: now)
        let reason = try CatalogInput.reason(body)
        let write = try await written {
            try await store.updateRelease(
                appId: appId, platform: platform, version: version, expectedRevision: expected, actor: identity.key.actor,
                reason: reason, now: now
            ) { release in
                do throws(FieldError) { return try CatalogInput.releasePatch(body, to: release, now: now) } catch {
                    throw CatalogError.invalid(error)
                }
            }
        }
        return try revisioned(write, status: .ok)
    }
}
