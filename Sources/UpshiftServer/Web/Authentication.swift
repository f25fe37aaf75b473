import Hummingbird
import UpshiftCore

/// Puts the key behind `Authorization: Bearer <secret>` (the scheme case-insensitive) into the context:
/// a missing, malformed, unknown or revoked key is `401`. Route groups of the API carry it, before
/// ``RequireAccess``.
struct BearerAuthentication: RouterMiddleware {
    typealias Context = UpshiftRequestContext
    let keys: KeyDirectory

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        guard let secret = request.bearerToken else { throw AuthenticationRequired("send Authorization: Bearer <key>") }
        guard let key = keys.key(secret: secret) else { throw AuthenticationRequired("unknown or revoked key") }
        var context = context
        context.identity = Identity(key: key, session: nil)
        return try await next(request, context)
    }
}

/// Lets a request through when its caller has `access` to the app of its path (`{app}`; none for
/// `.ingest` and `.createApps`): `401` without a caller, `404` for a path that names no app, `403`
/// otherwise (``Identity/authorize(_:app:)``, the one rule).
struct RequireAccess: RouterMiddleware {
    typealias Context = UpshiftRequestContext
    let access: Access

    init(_ access: Access) {
        self.access = access
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let identity = try context.requireIdentity()
        let app = context.parameters.get("app") == nil ? nil : try context.appId()
        try identity.authorize(access, app: app)
        return try await next(request, context)
    }
}

extension Request {
    /// The token of `Authorization: Bearer <token>` (the scheme in any case); nil without one.
    var bearerToken: String? {
        guard let parts = headers[.authorization]?.split(separator: " ", maxSplits: 1), parts.count == 2,
            parts[0].lowercased() == "bearer"
        else { return nil }
        return String(parts[1])
    }
}
