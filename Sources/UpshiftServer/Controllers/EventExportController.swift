import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// `GET /v1/apps/{app}/events/export[?since=&limit=]` (admin token: raw install ids are personal data):
/// the app's events after the cursor `since`, for a warehouse (docs/OPERATIONS.md, "Export for a
/// warehouse"). NDJSON, or CSV for `Accept: text/csv`; gzip for `Accept-Encoding: gzip`. `Upshift-Cursor`
/// says where the next export resumes; every row carries its own cursor too, so that an answer cut off
/// midway resumes after its last whole row.
///
/// A `since` before the last event retention dropped is `410`: the events after it are no longer whole.
///
/// `Upshift-Complete: true` says the answer reached the newest final event; `false`, that it stopped at
/// `limit` rows or after ``scanLimit`` events of the log, and the next answer goes on.
///
/// Bounds: at most `limit` events an answer (default 10,000, at most 100,000), read 1,000 a statement and
/// written as they are read; the answer counts as one of the token's reads until its body is written.
struct EventExportController {
    let exporter: EventExporter
    let retention: LogRetention
    let snapshot: CatalogSnapshot
    let readers: ReaderShares

    static let defaultLimit = 10_000
    static let maximumLimit = 100_000
    /// Events of the log (any app's) an answer reaches past its cursor at most: the log has no index by
    /// app, and each statement must end within the reports' statement timeout.
    static let scanLimit = 500_000
    static let cursorHeader = HTTPField.Name("Upshift-Cursor")!
    static let completeHeader = HTTPField.Name("Upshift-Complete")!

    /// The routes, relative to `/v1/apps/{app}`.
    func routes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: authentication).add(middleware: RequireAccess(.personalData))
            .get("events/export", use: export)
        return routes
    }

    @Sendable func export(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let app = try context.appId()
        guard snapshot.app(app) != nil else { throw CatalogError.appNotFound(app.rawValue) }
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["since", "limit"])
        var since = FeedPosition.start
        if let text = query["since"] {
            guard let cursor = FeedPosition(cursor: text) else {
                throw ProblemDetails.badRequest("since must be a cursor tx_id:position that an export gave, such as 0:0", field: "since")
            }
            try await retention.requireWhole(after: cursor, field: "since")
            since = cursor
        }
        let limit = try query.integer("limit", default: Self.defaultLimit, range: 1...Self.maximumLimit)
        let format: EventExportFormat = (request.headers[.accept] ?? "").contains("text/csv") ? .csv : .ndjson
        let gzip = Self.acceptsGzip(request.headers[.acceptEncoding])
        let hold = try readers.hold(token: try context.requireIdentity().key.id)
        let range = try await exporter.range(app: app, after: since, limit: limit)

        var headers: HTTPFields = [.contentType: format.contentType, .cacheControl: "no-store", .vary: "Accept, Accept-Encoding"]
        headers[Self.cursorHeader] = range.through.cursor
        headers[Self.completeHeader] = range.complete ? "true" : "false"
        if gzip { headers[.contentEncoding] = "gzip" }
        let exporter = self.exporter
        // A failure midway ends the connection without the body's end (and without gzip's trailer): the
        // client sees a cut-off answer, never a short one that looks whole.
        return Response(
            status: .ok, headers: headers,
            body: ResponseBody { writer in
                let stream = gzip ? try GzipStream() : nil
                try await exporter.write(range, as: format) { page in
                    let bytes = ByteBuffer(string: page)
                    try await writer.write(try stream?.compress(bytes) ?? bytes)
                }
                if let stream { try await writer.write(try stream.finish()) }
                try await writer.finish(nil)
                withExtendedLifetime(hold) {}
            })
    }

    /// Whether `Accept-Encoding` names gzip (or x-gzip) without `q=0`.
    static func acceptsGzip(_ header: String?) -> Bool {
        guard let header else { return false }
        return header.split(separator: ",").contains { item in
            let parts = item.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces).lowercased() }
            guard let coding = parts.first, coding == "gzip" || coding == "x-gzip" else { return false }
            let q = parts.dropFirst().first { $0.hasPrefix("q=") }.flatMap { Double($0.dropFirst(2)) } ?? 1
            return q > 0
        }
    }
}
