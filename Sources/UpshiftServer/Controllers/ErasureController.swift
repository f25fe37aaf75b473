import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// Erasure of an install (docs/OPERATIONS.md, "Erasure of an install"), with an admin token:
///
/// - `DELETE /v1/apps/{app}/installs/{install}`: `202` with the request (`id`, `status: pending`); a repeat
///   while it is open answers the same request.
/// - `GET /v1/apps/{app}/erasures/{id}`: `pending` or `done`; neither shows the install id, only its SHA-256.
struct ErasureController {
    let store: ErasureStore
    let snapshot: CatalogSnapshot
    let clock: any WallClock

    /// The routes, relative to `/v1/apps/{app}`.
    func routes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        let admin = routes.add(middleware: authentication).add(middleware: RequireAccess(.personalData))
        admin.delete("installs/:install", use: forget)
        admin.get("erasures/:erasure", use: status)
        return routes
    }

    @Sendable func forget(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let app = try context.knownApp(in: snapshot)
        let install = try uuid(context, "install", "an install id")
        let erasure = try await store.request(app: app, install: install, at: clock.now())
        return try JSONResponse.make(ErasureBody(erasure), status: .accepted)
    }

    @Sendable func status(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let app = try context.knownApp(in: snapshot)
        let id = try uuid(context, "erasure", "an erasure id")
        guard let erasure = try await store.erasure(app: app, id: id) else {
            throw ProblemDetails.notFound("no erasure \(id.uuidString.lowercased()) of app \(app)")
        }
        return try JSONResponse.make(ErasureBody(erasure))
    }


    private func uuid(_ context: UpshiftRequestContext, _ name: String, _ what: String) throws -> UUID {
        let text = try context.pathValue(name)
        guard let id = UUID(uuidString: text) else {
            throw ProblemDetails.badRequest("\(name) must be \(what): a UUID such as 9f1c0b6e-3d2a-4c5b-8e7f-0a1b2c3d4e5f", field: name)
        }
        return id
    }
}

/// An erasure as the API shows it.
struct ErasureBody: Encodable {
    let id: String
    let status: String
    let installSha256: String
    let requestedAt: String
    let erasedAt: String?
    let events: Int?
    let doneAt: String?

    init(_ erasure: Erasure) {
        id = erasure.id.uuidString.lowercased()
        status = erasure.status.rawValue
        installSha256 = erasure.installSHA256
        requestedAt = Timestamp.format(erasure.requestedAt)
        erasedAt = erasure.erasedAt.map(Timestamp.format)
        events = erasure.events
        doneAt = erasure.doneAt.map(Timestamp.format)
    }
}
