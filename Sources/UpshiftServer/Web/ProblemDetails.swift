import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// An RFC 7807 problem, the one shape every error takes on the wire (docs/ARCHITECTURE.md, "One error
/// mapping"). Made from a ``ProblemType``; ``ProblemDetails/from(_:logger:)`` turns any error into one.
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

    init(_ kind: ProblemType, detail: String? = nil, field: String? = nil) {
        self.init(kind.status, type: kind.urn, title: kind.title, detail: detail, field: field)
    }

    /// Hummingbird's own errors, which carry only a status: `urn:upshift:problem:http-<status>`.
    init(httpStatus status: HTTPResponse.Status) {
        self.init(status, type: ProblemType.prefix + "http-\(status.code)", title: status.reasonPhrase)
    }

    private init(_ status: HTTPResponse.Status, type: String, title: String, detail: String? = nil, field: String? = nil) {
        self.code = status.code
        self.type = type
        self.title = title
        self.detail = detail
        self.field = field
    }

    /// Whether this is a problem of that kind.
    func `is`(_ kind: ProblemType) -> Bool { type == kind.urn }

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
        ProblemDetails(.badRequest, detail: detail, field: field)
    }

    static func notFound(_ detail: String) -> ProblemDetails {
        ProblemDetails(.notFound, detail: detail)
    }

    static func tooLarge(_ detail: String) -> ProblemDetails {
        ProblemDetails(.tooLarge, detail: detail)
    }

    static func rateLimited(_ detail: String, retryAfter: Int) -> ProblemDetails {
        ProblemDetails(.rateLimited, detail: detail).retryAfter(seconds: retryAfter)
    }

    static func unavailable(_ detail: String, retryAfter: Int = 1) -> ProblemDetails {
        ProblemDetails(.unavailable, detail: detail).retryAfter(seconds: retryAfter)
    }

    static func methodNotAllowed(_ methods: [HTTPRequest.Method]) -> ProblemDetails {
        let allowed = methods.map(\.rawValue).sorted().joined(separator: ", ")
        var problem = ProblemDetails(.methodNotAllowed, detail: "this path answers \(allowed)")
        problem.allow = allowed
        return problem
    }

    static let internalError = ProblemDetails(.internalError, detail: "the server failed; the error is logged")
}

extension HTTPField.Name {
    static let xContentTypeOptions = Self("X-Content-Type-Options")!
    static let xForwardedFor = Self("X-Forwarded-For")!
    static let xForwardedProto = Self("X-Forwarded-Proto")!
}
