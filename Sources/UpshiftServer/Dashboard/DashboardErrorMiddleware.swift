import Hummingbird
import Logging

/// The dashboard's side of the one error mapping (``ProblemDetails/from(_:logger:)``): a client's
/// mistake becomes an HTML page with its status, a missing session sends the browser to the sign-in
/// form, and anything else (a 503, a logged 500) goes on to the problem middleware as JSON.
struct DashboardErrorMiddleware: RouterMiddleware {
    typealias Context = UpshiftRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        do {
            return try await next(request, context)
        } catch is AuthenticationRequired {
            guard request.method == .get else {
                return SignInPage.view(error: "Your session has ended; sign in again.").response(status: .unauthorized)
            }
            return DashboardPages.redirect("/dashboard")
        } catch {
            // What is not the client's doing goes on unlogged here: the problem middleware logs it.
            let problem = ProblemDetails.from(error, logger: Self.silent)
            guard problem.status.code < 500 else { throw error }
            return Self.page(problem).response(status: problem.status, headers: problem.retryAfterHeader)
        }
    }

    private static let silent = Logger(label: "upshift.dashboard", factory: { _ in SwiftLogNoOpLogHandler() })

    static func page(_ problem: ProblemDetails) -> Page {
        var detail = problem.detail ?? problem.title
        if problem.is(.stale) {
            detail = "Someone changed this since you loaded the form, so nothing was saved. Go back, reload the page and check the current values before trying again."
        }
        let body: HTML = """
            <p class="notice error" role="alert">\(detail)</p><p><a href="/dashboard">Back to the dashboard</a></p>
            """
        return Page(title: problem.title, body: body)
    }
}

extension ProblemDetails {
    /// `Retry-After` of a 429 shown as a page.
    var retryAfterHeader: HTTPFields {
        retryAfterSeconds.map { [.retryAfter: String($0)] } ?? [:]
    }
}
