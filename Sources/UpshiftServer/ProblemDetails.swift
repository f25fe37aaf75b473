import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import UpshiftCore
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
    /// For `405`: the methods the path has.
    var allow: String?

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
        Response(status: status, headers: headers, body: .init(byteBuffer: body))
    }

    /// Never cached, never sniffed.
    var headers: HTTPFields {
        var headers: HTTPFields = [
            .contentType: "application/problem+json", .cacheControl: "no-store", .xContentTypeOptions: "nosniff",
        ]
        if let retryAfterSeconds { headers[.retryAfter] = String(retryAfterSeconds) }
        if let allow { headers[.allow] = allow }
        return headers
    }

    /// The problem as JSON (sorted keys).
    var body: ByteBuffer {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return ByteBuffer(bytes: (try? encoder.encode(self)) ?? Data(#"{"status":500}"#.utf8))
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

    static func rateLimited(_ detail: String, retryAfter: Int) -> ProblemDetails {
        ProblemDetails(.tooManyRequests, type: "urn:upshift:problem:rate-limited", title: "Too many requests", detail: detail)
            .retryAfter(seconds: retryAfter)
    }

    static func unavailable(_ detail: String, retryAfter: Int = 1) -> ProblemDetails {
        ProblemDetails(
            .serviceUnavailable, type: "urn:upshift:problem:unavailable", title: "Service unavailable", detail: detail
        ).retryAfter(seconds: retryAfter)
    }

    static func methodNotAllowed(_ methods: [HTTPRequest.Method]) -> ProblemDetails {
        let allowed = methods.map(\.rawValue).sorted().joined(separator: ", ")
        var problem = ProblemDetails(
            .methodNotAllowed, type: "urn:upshift:problem:method-not-allowed", title: "Method not allowed",
            detail: "this path answers \(allowed)")
        problem.allow = allowed
        return problem
    }

    static func invalidField(_ error: FieldError) -> ProblemDetails {
        switch error.kind {
        case .invalid:
            ProblemDetails(
                .badRequest, type: "urn:upshift:problem:invalid-field", title: "Invalid field", detail: error.description,
                field: error.field)
        case .inconsistent:
            ProblemDetails(
                .unprocessableContent, type: "urn:upshift:problem:inconsistent-field", title: "Inconsistent field",
                detail: error.description, field: error.field)
        }
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

    static let internalError = ProblemDetails(
        .internalServerError, type: "urn:upshift:problem:internal", title: "Internal error",
        detail: "the server failed; the error is logged")

    /// The one mapping from an error to what the client is told (STYLE.md rule 4): a domain error of a
    /// client's mistake becomes its 4xx wherever it was thrown, an unreachable database a 503, and
    /// anything else a 500 that reveals nothing (the error is logged).
    static func from(_ error: any Error, logger: Logger) -> ProblemDetails {
        switch error {
        case let problem as ProblemDetails:
            return problem
        case let error as FieldError:
            return .invalidField(error)
        case let error as JSONParseError:
            return error.isLimit ? .tooLarge(error.description) : .invalidField(FieldError(error))
        case let error as CatalogError:
            return .catalog(error)
        case let error as IngestionError:
            switch error {
            case .databaseUnavailable: return .unavailable("the event log is unreachable; retry later", retryAfter: 2)
            case .overloaded: return .unavailable("too many events are waiting; retry later", retryAfter: 1)
            case .shuttingDown: return .unavailable("the server is shutting down; retry", retryAfter: 1)
            }
        case is NIOTooManyBytesError:
            return .tooLarge("the body is larger than this endpoint takes")
        case is HTTPParserError:
            // The request broke off or was not HTTP (the client closed the connection mid-body):
            // nobody may be left to read this answer, but it is the client's doing, never a 500.
            return .badRequest("the request is not well-formed HTTP, or ended before its body did")
        case is RequestTimedOut:
            return ProblemDetails(
                .requestTimeout, type: "urn:upshift:problem:request-timeout", title: "Request timeout",
                detail: "the request's body did not arrive in time")
        case let error as any HTTPResponseError:
            let status = error.status
            return ProblemDetails(status, type: "urn:upshift:problem:http-\(status.code)", title: status.reasonPhrase)
        case _ where Database.isConnectionError(error):
            logger.warning("database unreachable", metadata: ["error": "\(String(reflecting: error))"])
            return .unavailable("the database is unreachable; retry later", retryAfter: 2)
        default:
            logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return .internalError
        }
    }
}

extension HTTPField.Name {
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}

/// Turns every error into a problem response (``ProblemDetails/from(_:logger:)``), a path that exists
/// asked with another method into `405`, and marks every answer `X-Content-Type-Options: nosniff`.
struct ProblemMiddleware<Context: RequestContext>: RouterMiddleware {
    var routes: RouteTable?

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var response: Response
        do {
            response = try await next(request, context)
        } catch let error as HTTPError where error.status == .notFound {
            var problem = ProblemDetails.from(error, logger: context.logger)
            if let methods = routes?.methods(of: request.uri.path) { problem = .methodNotAllowed(methods) }
            response = try problem.response(from: request, context: context)
        } catch {
            response = try ProblemDetails.from(error, logger: context.logger).response(from: request, context: context)
        }
        if response.headers[.xContentTypeOptions] == nil { response.headers[.xContentTypeOptions] = "nosniff" }
        return response
    }
}
