import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard`: the apps the caller's key covers, with a link per platform (the sign-in form
/// without a session).
enum AppsPage {
    static func model(_ identity: Identity, snapshot: CatalogSnapshot) -> [AppCatalog] {
        snapshot.appIds.filter { identity.key.covers(app: $0) }.compactMap { snapshot.app($0)?.catalog }
    }

    static func view(_ apps: [AppCatalog]) -> HTML {
        let rows = apps.map { app -> HTML in
            let links = app.platforms.map { platform -> HTML in
                "<a href=\"/dashboard/apps/\(app.app.id)?platform=\(DashboardForm.escape(platform))\">\(platform)</a> "
            }
            return "<tr><td><a href=\"/dashboard/apps/\(app.app.id)\">\(app.app.name)</a> <span class=\"muted\">\(app.app.id)</span></td><td>\(links)</td></tr>"
        }
        return rows.isEmpty
            ? "<p class=\"notice\">No apps yet. Create one with <code>upshift apps create</code>, or load the demo with <code>upshift demo</code>.</p>"
            : "<div class=\"scroll\"><table><thead><tr><th>App</th><th>Platforms</th></tr></thead><tbody>\(rows)</tbody></table></div>"
    }
}

extension DashboardPages {
    @Sendable func home(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        guard let identity = context.identity else { return SignInPage.view(error: nil).response() }
        return Page.framed(identity, title: "Apps", body: AppsPage.view(AppsPage.model(identity, snapshot: snapshot))).response()
    }
}
