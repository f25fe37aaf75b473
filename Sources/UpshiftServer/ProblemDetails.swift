import Foundation
import Hummingbird
import Logging
import UpshiftStore

/// An RFC 7807 problem, the one shape every error takes on the wire (STYLE.md rule 4).
public struct ProblemDetails: Error, HTTPResponseError, Codable, Sendable {
    public var type: String
    public var title: String
    public var status: HTTPResponse.Status { .init(code: code) }
    public var detail: String?
    /// The request field or parameter at fault, when there is one.
    public var field: String?
    var code: Int
    var retryAfterSeconds: Int?

    public init(_ status: HTTPResponse.Status, type: String, title: String, detail: String? = nil, field: String? = nil) {
        self.code = status.code
        self.type = type
        self.title = title
        self.detail = detail
        self.field = field
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: WireKeys.self)
        try container.encode(type, forKey: .type)
        try container.encode(title, forKey: .title)
        try container.encode(code, forKey: .status)
        try container.encodeIfPresent(detail, forKey: .detail)
        try container.encodeIfPresent(field, forKey: .field)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: WireKeys.self)
        type = try container.decode(String.self, forKey: .type)
        title = try container.decode(String.self, forKey: .title)
        code = try container.decode(Int.self, forKey: .status)
        detail = try container.decodeIfPresent(String.self, forKey: .detail)
        field = try container.decodeIfPresent(String.self, forKey: .field)
    }

    private enum WireKeys: String, CodingKey {
        case type, title, status, detail, field
    }

    /// Adds `Retry-After` to the response (429 and 503).
    public func retryAfter(seconds: Int) -> ProblemDetails {
        var copy = self
        copy.retryAfterSeconds = seconds
        return copy
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var headers: HTTPFields = [.contentType: "application/problem+json"]
        if let retryAfterSeconds { headers[.retryAfter] = String(retryAfterSeconds) }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(self)
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension ProblemDetails {
    static func badRequest(_ detail: String, field: String? = nil) -> ProblemDetails {
        ProblemDetails(.badRequest, type: "urn:upshift:problem:bad-request", title: "Bad request", detail: detail, field: field)
    }

    static func unauthorized(_ detail: String) -> ProblemDetails {
        ProblemDetails(.unauthorized, type: "urn:upshift:problem:unauthorized", title: "Unauthorized", detail: detail)
    }

    static func forbidden(_ detail: String) -> ProblemDetails {
        ProblemDetails(.forbidden, type: "urn:upshift:problem:forbidden", title: "Forbidden", detail: detail)
    }

    static func notFound(_ detail: String) -> ProblemDetails {
        ProblemDetails(.notFound, type: "urn:upshift:problem:not-found", title: "Not found", detail: detail)
    }

    static func tooLarge(_ detail: String) -> ProblemDetails {
        ProblemDetails(.contentTooLarge, type: "urn:upshift:problem:too-large", title: "Request too large", detail: detail)
    }

    static func unavailable(_ detail: String, retryAfter: Int = 1) -> ProblemDetails {
        ProblemDetails(
            .serviceUnavailable, type: "urn:upshift:problem:unavailable", title: "Service unavailable", detail: detail
        ).retryAfter(seconds: retryAfter)
    }

    static let internalError = ProblemDetails(
        .internalServerError, type: "urn:upshift:problem:internal", title: "Internal error",
        detail: "the server failed; the error is logged")
}

/// Turns every error into a problem response in one place: known ones as they are, Hummingbird's own
/// (404, 405, 413 …) with their status, anything else as a logged 500 that reveals nothing.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch let problem as ProblemDetails {
            return try problem.response(from: request, context: context)
        } catch let error as any HTTPResponseError {
            let status = error.status
            let problem = ProblemDetails(
                status, type: "urn:upshift:problem:http-\(status.code)", title: status.reasonPhrase,
                detail: nil)
            return try problem.response(from: request, context: context)
        } catch where Database.isConnectionError(error) {
            context.logger.warning("database unreachable", metadata: ["error": "\(String(reflecting: error))"])
            return try ProblemDetails.unavailable("the database is unreachable; retry later", retryAfter: 2)
                .response(from: request, context: context)
        } catch {
            context.logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return try ProblemDetails.internalError.response(from: request, context: context)
        }
    }
}
