import UpshiftCore
import UpshiftStore

/// Who makes a request: the key behind its bearer token (the API) or behind its session (the
/// dashboard). Authentication middleware puts it into the request context; handlers start from it.
struct Identity: Sendable {
    let key: APIKey
    /// The dashboard session it came from; nil for a bearer token.
    let session: DashboardSession?

    /// Whether this caller may change the catalog (the dashboard shows controls only then).
    var mayWrite: Bool { key.scope == .admin }

    /// The one authorization rule (docs/ARCHITECTURE.md, "Identity"), for the API and the dashboard alike:
    /// nothing but `.ingest` needs an ingest key; reads take a read or admin token, writes and raw
    /// events (personal data) an admin token, each covering `app`; creating apps takes an admin token
    /// that covers every app.
    func authorize(_ access: Access, app: AppID?) throws(AccessDenied) {
        switch access {
        case .ingest:
            guard key.scope == .ingest, key.appId != nil else { throw AccessDenied("only an ingest key may post events") }
            return
        case .read:
            guard key.scope == .read || key.scope == .admin else { throw AccessDenied("a read or admin token is required") }
        case .write, .createApps, .personalData:
            guard key.scope == .admin else { throw AccessDenied("an admin token is required") }
        }
        if access == .createApps {
            guard key.appId == nil else { throw AccessDenied("creating an app needs an admin token that covers every app") }
        } else if let app, !key.covers(app: app) {
            throw AccessDenied("the token does not cover app \(app)")
        }
    }
}

/// What a route asks of its caller.
enum Access: Sendable, Equatable {
    /// Post events: an ingest key bound to an app.
    case ingest
    /// Read an app's catalog, history and reports, or its dashboard pages.
    case read
    /// Change an app's catalog.
    case write
    /// Create apps.
    case createApps
    /// Read an app's raw events, install ids included (personal data): an admin token.
    case personalData
}

/// The caller may not do this (`403`).
struct AccessDenied: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// No caller is known (`401` from the API; the dashboard sends the browser to its sign-in form).
struct AuthenticationRequired: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}
