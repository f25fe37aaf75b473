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

    /// `GET /v1/apps/{app}`
    @Sendable func app(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        try QueryParameters(request).refuseUnknown(allowed: [])
        guard let app = try await store.apps(id: appId).first else { throw CatalogError.appNotFound(appId) }
        return try JSONResponse.make(app)
    }
}
