import HTTPTypes

/// Every kind of problem the server answers, each with its status and title: the one list of
/// `urn:upshift:problem:…` types (docs/openapi.yaml, `Problem`, lists the same).
enum ProblemType: String, CaseIterable, Sendable {
    case badRequest = "bad-request"
    case invalidField = "invalid-field"
    case inconsistentField = "inconsistent-field"
    case unauthorized
    case forbidden
    case notFound = "not-found"
    case gone
    case methodNotAllowed = "method-not-allowed"
    case requestTimeout = "request-timeout"
    case exists
    case stale
    case ifMatchRequired = "if-match-required"
    case tooLarge = "too-large"
    case requestTooLarge = "request-too-large"
    case unsupportedMediaType = "unsupported-media-type"
    case unsupportedEncoding = "unsupported-encoding"
    case rateLimited = "rate-limited"
    case unavailable
    case internalError = "internal"

    static let prefix = "urn:upshift:problem:"

    var urn: String { Self.prefix + rawValue }

    var status: HTTPResponse.Status {
        switch self {
        case .badRequest, .invalidField: .badRequest
        case .inconsistentField: .unprocessableContent
        case .unauthorized: .unauthorized
        case .forbidden: .forbidden
        case .notFound: .notFound
        case .gone: .gone
        case .methodNotAllowed: .methodNotAllowed
        case .requestTimeout: .requestTimeout
        case .exists: .conflict
        case .stale: .preconditionFailed
        case .ifMatchRequired: .preconditionRequired
        case .tooLarge: .contentTooLarge
        case .requestTooLarge: .requestHeaderFieldsTooLarge
        case .unsupportedMediaType, .unsupportedEncoding: .unsupportedMediaType
        case .rateLimited: .tooManyRequests
        case .unavailable: .serviceUnavailable
        case .internalError: .internalServerError
        }
    }

    var title: String {
        switch self {
        case .badRequest: "Bad request"
        case .invalidField: "Invalid field"
        case .inconsistentField: "Inconsistent field"
        case .unauthorized: "Unauthorized"
        case .forbidden: "Forbidden"
        case .notFound: "Not found"
        case .gone: "Gone"
        case .methodNotAllowed: "Method not allowed"
        case .requestTimeout: "Request timeout"
        case .exists: "Already exists"
        case .stale: "Stale revision"
        case .ifMatchRequired: "If-Match required"
        case .tooLarge: "Request too large"
        case .requestTooLarge: "Request header fields too large"
        case .unsupportedMediaType: "Unsupported media type"
        case .unsupportedEncoding: "Unsupported content encoding"
        case .rateLimited: "Too many requests"
        case .unavailable: "Service unavailable"
        case .internalError: "Internal error"
        }
    }
}
