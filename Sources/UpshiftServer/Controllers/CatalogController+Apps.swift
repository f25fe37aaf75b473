import Hummingbird
import UpshiftCore
import UpshiftStore

extension CatalogController {
    /// `POST /v1/apps`
    @Sendable func createApp(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let body = try await Self.json(request)
        let app = try CatalogInput.app(body)
        let reason = try CatalogInput.reason(body)
        let created = try await written {
            try await store.createApp(app, actor: identity.key.actor, reason: reason, now: clock.now())
        }
        return try JSONResponse.make(created, status: .created)
    }

    /// `GET /v1/apps/{app}`, with its revision as `ETag`.
    @Sendable func app(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        try QueryParameters(request).refuseUnknown(allowed: [])
        guard let app = try await store.apps(id: appId).first else { throw CatalogError.appNotFound(appId.rawValue) }
        return try revisioned(CatalogWrite(value: app, revision: app.revision, warnings: []), status: .ok)
    }

    /// `PATCH /v1/apps/{app}` with `If-Match`: a JSON merge patch of the app (``CatalogInput/appPatch(_:to:)``).
    @Sendable func patchApp(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let expected = try ifMatch(request)
        let body = try await Self.json(request)
        // The body is checked before the store is asked, so that a bad field is a 400 whatever the revision.
        _ = try CatalogInput.appPatch(body, to: AppInfo(id: appId, name: "-"))
        let reason = try CatalogInput.reason(body)
        let write = try await written {
            try await store.updateApp(
                appId: appId, expectedRevision: expected, actor: identity.key.actor, reason: reason, now: clock.now()
            ) { app in
                do throws(FieldError) { return try CatalogInput.appPatch(body, to: app) } catch {
                    throw CatalogError.invalid(error)
                }
            }
        }
        return try revisioned(write, status: .ok)
    }
}
