import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// Puts the caller of a dashboard request into the context: the session its cookie names, as
/// ``Identity`` with its key. A form post must also come from this site (`Origin`, checked before the
/// session is looked at) and carry the session's CSRF token; its body is read here once and handed on.
/// A cookie that cannot be a session token is never looked up, and look-ups take a token from the
/// client address's bucket, so made-up cookies cost no more than the limit allows.
struct SessionMiddleware: RouterMiddleware {
    typealias Context = UpshiftRequestContext
    let sessions: SessionStore
    let limiter: RateLimiter
    let trustedProxies: Set<String>
    let clock: any WallClock

    private struct CSRFField: Decodable {
        var csrf: String?
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        var request = request
        var context = context
        if request.method == .post { try Self.sameOrigin(request) }
        if let token = request.cookies[SessionCookie.name]?.value, KeySecret.isRandomToken(token.utf8) {
            try limiter.enforce(
                ClientAddress.of(request, context, trustedProxies: trustedProxies),
                detail: "too many dashboard requests from your address; wait a moment")
            if let session = try await sessions.find(token: token, now: clock.now()) {
                context.identity = Identity(key: session.key, session: session)
            }
        }
        if request.method == .post, let session = context.identity?.session {
            let body = try await DashboardForm.collect(request)
            let sent = try DashboardForm.decode(CSRFField.self, from: body).csrf
            guard let sent, constantTimeEqual(sent, session.csrfToken) else {
                throw AccessDenied("this form is not from your session (missing or wrong CSRF token); reload the page")
            }
            request.body = .init(buffer: body)
        }
        return try await next(request, context)
    }

    /// Browsers send `Origin` with every POST; one from another site is refused even before the
    /// session is looked at (SameSite=Strict already keeps the cookie away from it).
    static func sameOrigin(_ request: Request) throws {
        guard let origin = request.headers[.origin] else { return }
        let host = request.head.authority ?? ""
        guard origin.utf8.count <= 2_048, let url = URL(string: origin), let originHost = url.host else {
            throw AccessDenied("cross-site form submissions are refused")
        }
        let originAuthority = url.port.map { "\(originHost):\($0)" } ?? originHost
        guard originAuthority.lowercased() == host.lowercased() else {
            throw AccessDenied("cross-site form submissions are refused")
        }
    }
}
