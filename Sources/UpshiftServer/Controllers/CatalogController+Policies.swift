import Hummingbird
import UpshiftCore
import UpshiftStore

extension CatalogController {
    /// `GET /v1/apps/{app}/policies/{platform}`, with its revision as `ETag` (`"0"`: never set).
    @Sendable func policy(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let platform = try context.pathPlatform()
        try QueryParameters(request).refuseUnknown(allowed: [])
        let policy = try await context.app(in: store).policy(for: platform)
        return try revisioned(CatalogWrite(value: policy, revision: policy.revision, warnings: []), status: .ok)
    }

    /// `PUT /v1/apps/{app}/policies/{platform}` with `If-Match`.
    @Sendable func putPolicy(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let platform = try context.pathPlatform()
        let expected = try ifMatch(request)
        let body = try await Self.json(request)
        let policy = try CatalogInput.policy(body)
        let reason = try CatalogInput.reason(body)
        let write = try await written {
            try await store.replacePolicy(
                appId: appId, platform: platform, policy, expectedRevision: expected, actor: identity.key.actor,
                reason: reason, now: clock.now())
        }
        return try revisioned(write, status: .ok)
    }
}
