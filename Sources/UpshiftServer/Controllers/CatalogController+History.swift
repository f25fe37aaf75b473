import Hummingbird
import UpshiftCore
import UpshiftStore

extension CatalogController {
    struct History: Encodable {
        var entries: [CatalogHistoryEntry]
        /// Pass as `before` for the next (older) page; absent on the last page.
        var nextBefore: Int?
    }

    /// `GET /v1/apps/{app}/history[?limit=&before=]`: newest first.
    @Sendable func history(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["limit", "before"])
        let limit = try query.integer("limit", default: 50, range: 1...500)
        let before = try query["before"].map { _ in try query.integer("before", default: 0, range: 1...Int(Int32.max)) }
        guard try await !store.apps(id: appId).isEmpty else { throw CatalogError.appNotFound(appId.rawValue) }
        // One more than asked tells whether an older page exists.
        let entries = try await store.history(appId: appId, before: before, limit: limit + 1)
        let page = Array(entries.prefix(limit))
        let next = entries.count > limit ? page.last.map(\.version) : nil
        return try JSONResponse.make(History(entries: page, nextBefore: next), encoder: CatalogCoding.encoder())
    }
}
