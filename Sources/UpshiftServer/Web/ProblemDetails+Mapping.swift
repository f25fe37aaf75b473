import Foundation
import Hummingbird
import Logging
import NIOCore
import NIOHTTP1
import UpshiftCore
import UpshiftStore

extension ProblemDetails {
    /// The one mapping from an error to what the client is told (docs/ARCHITECTURE.md, "One error
    /// mapping"), for the API's problem JSON and the dashboard's error pages alike: a domain error of a
    /// client's mistake becomes its 4xx wherever it was thrown, an unreachable database a 503, and anything
    /// else a 500 that reveals nothing (the error is logged).
    static func from(_ error: any Error, logger: Logger) -> ProblemDetails {
        switch error {
        case let problem as ProblemDetails:
            return problem
        case let error as AuthenticationRequired:
            return ProblemDetails(.unauthorized, detail: error.description)
        case let error as AccessDenied:
            return ProblemDetails(.forbidden, detail: error.description)
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
        case let error as DatabaseUnavailable:
            logger.warning("database unavailable", metadata: ["error": "\(error)"])
            return .unavailable(error.clientDetail, retryAfter: 2)
        case let error as ReportStore.NotReady:
            return .unavailable("\(error.description); retry shortly", retryAfter: 5)
        case is NIOTooManyBytesError:
            return .tooLarge("the body is larger than this endpoint takes")
        case is HTTPParserError:
            // The request broke off or was not HTTP (the client closed the connection mid-body):
            // nobody may be left to read this answer, but it is the client's doing, never a 500.
            return .badRequest("the request is not well-formed HTTP, or ended before its body did")
        case is RequestTimedOut:
            return ProblemDetails(.requestTimeout, detail: "the request's body did not arrive in time")
        case let error as any HTTPResponseError:
            return ProblemDetails(httpStatus: error.status)
        case _ where Database.isConnectionError(error):
            logger.warning("database unreachable", metadata: ["error": "\(String(reflecting: error))"])
            return .unavailable("the database is unreachable; retry later", retryAfter: 2)
        default:
            logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return .internalError
        }
    }

    private static func invalidField(_ error: FieldError) -> ProblemDetails {
        switch error.kind {
        case .invalid: ProblemDetails(.invalidField, detail: error.description, field: error.field)
        case .inconsistent: ProblemDetails(.inconsistentField, detail: error.description, field: error.field)
        case .gone: ProblemDetails(.gone, detail: error.description, field: error.field)
        }
    }

    private static func catalog(_ error: CatalogError) -> ProblemDetails {
        switch error {
        case .appNotFound, .releaseNotFound, .ruleNotFound: .notFound(error.description)
        case .appExists, .releaseExists: ProblemDetails(.exists, detail: error.description)
        case .stale: ProblemDetails(.stale, detail: error.description + "; read it again and retry")
        case .invalid(let field): .invalidField(field)
        }
    }
}

extension DatabaseUnavailable {
    /// What a client is told: which bound passed, not the pool's inner error.
    var clientDetail: String {
        switch reason {
        case .busy: "the server is busy; retry later"
        case .timedOut, .statementTimeout: "the database did not answer in time; retry later"
        case .conflict: "the database cancelled the read; retry"
        case .connectionLost, .poolFailed: "the database is unreachable; retry later"
        }
    }
}
