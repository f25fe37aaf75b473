import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// The sign-in form: a read or admin token starts a session; sign-out ends it.
enum SignInPage {
    struct Form: Decodable {
        var token: String?
    }

    static func view(error: String?) -> Page {
        let notice: HTML = error.map { "<p class=\"notice error\" role=\"alert\">\($0)</p>" } ?? ""
        let body: HTML = """
            \(notice)<form class="stack" method="post" action="/dashboard/sign-in">
            <label>Read or admin token<input type="password" name="token" autocomplete="current-password" required \
            placeholder="upshift_read_…" aria-describedby="token-help"></label>
            <p id="token-help" class="muted">On a first run, <code>scripts/run</code> printed one of each in its box of keys \
            (<code>read</code> and <code>admin</code>). Create more with <code>upshift keys create --scope read --name NAME</code>. \
            Read tokens see reports; admin tokens also change rollouts.</p>
            <button class="primary" type="submit">Sign in</button></form>
            """
        return Page(title: "Sign in", body: body)
    }
}

extension DashboardPages {
    /// `POST /dashboard/sign-in` (limited per client address before the form is read).
    @Sendable func signIn(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try SessionMiddleware.sameOrigin(request)
        let form = try await DashboardForm.decode(SignInPage.Form.self, from: request)
        let token = (form.token ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        // The rule a session's pages ask is `Identity.authorize`; an ingest key could pass none of them.
        guard let key = keys.key(secret: token), key.scope != .ingest else {
            return SignInPage.view(error: "That token is unknown, revoked, or an ingest key. Use a read or admin token.")
                .response(status: .unauthorized)
        }
        let (secret, _) = try await sessions.create(key: key, now: clock.now(), lifetime: SessionCookie.lifetime)
        return Self.redirect("/dashboard", cookie: SessionCookie.setting(secret, for: request))
    }

    /// `POST /dashboard/sign-out`
    @Sendable func signOut(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        _ = try context.requireIdentity()
        if let token = request.cookies[SessionCookie.name]?.value { try await sessions.delete(token: token) }
        return Self.redirect("/dashboard", cookie: SessionCookie.clearing(for: request))
    }
}
