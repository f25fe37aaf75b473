import Foundation
import HTTPTypes
import Hummingbird
import UpshiftCore
import UpshiftStore

/// The web dashboard at `/dashboard`: server-rendered HTML and SVG, no scripts. Sign-in takes a read or
/// admin token and starts a session stored in PostgreSQL (valid on every instance); every page asks
/// the one authorization rule (``Identity/authorize(_:app:)``) what its caller may see and change.
/// Every form that changes state carries the session's CSRF token (``SessionMiddleware``).
///
/// Writes go through `CatalogStore` with the revision the form was rendered with, exactly as the API's
/// `If-Match`: a stale form is refused and says so. One file per page under `Pages/`.
struct DashboardPages: Sendable {
    let sessions: SessionStore
    let keys: KeyDirectory
    let catalog: CatalogStore
    let reports: ReportService
    let snapshot: CatalogSnapshot
    let clock: any WallClock
    /// Sign-in attempts per client address, taken before the form is read (the check's limit).
    let signInLimiter: RateLimiter
    /// Session look-ups per client address (a cookie costs a database query).
    let sessionLimiter: RateLimiter
    let trustedProxies: Set<String>
    /// What the rules recorded, and their evaluation for the rules page's preview.
    let ruleRecords: RuleRecordStore
    let ruleEvaluator: RuleEvaluator
    /// The app's webhook subscriptions, made as the API makes them.
    let webhookStore: WebhookStore
    let webhookSettings: WebhookSettings
    let afterWrite: @Sendable () async -> Void

    /// The routes, relative to `/dashboard`.
    var routes: RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: DashboardErrorMiddleware())
        routes.group().add(
            middleware: ClientRateLimit(
                limiter: signInLimiter, trustedProxies: trustedProxies,
                detail: "too many sign-in attempts from your address; wait a moment")
        ).post("sign-in", use: signIn)
        let signedIn = routes.group().add(
            middleware: SessionMiddleware(sessions: sessions, limiter: sessionLimiter, trustedProxies: trustedProxies, clock: clock))
        signedIn.post("sign-out", use: signOut)
        // Pages and previews are reads of the session's token (``ReaderShares``); writes are not.
        let reader = ReaderShare(shares: reports.readers)
        signedIn.group().add(middleware: reader).get(use: home)
        signedIn.group("apps/:app").add(middleware: RequireAccess(.read)).add(middleware: reader)
            .get(use: overview)
            .get("releases/:version", use: release)
            .get("history", use: history)
            .get("rules", use: rules)
        signedIn.group("apps/:app").add(middleware: RequireAccess(.write)).add(middleware: reader)
            .get("rollout", use: rollout)
            .get("settings", use: settings)
            .get("webhooks", use: webhooks)
            .post("policy/preview", use: backtestPolicy)
            .post("new-release/preview", use: backtestNewRelease)
            .post("rules/preview", use: previewRule)
        signedIn.group("apps/:app").add(middleware: RequireAccess(.write))
            .post("settings", use: saveSettings)
            .post("policy", use: savePolicy)
            .post("minimum", use: raiseMinimum)
            .post("new-release", use: addNewRelease)
            .post("releases/:version", use: changeRelease)
            .post("rules", use: saveRule)
            .post("webhooks", use: createWebhook)
            .post("webhooks/:webhook/:action", use: changeWebhook)
        return routes
    }

    // MARK: Shared by the pages

    /// The `platform` of the query, else the app's iOS or first platform.
    func platform(_ request: Request, _ app: AppCatalog) throws -> Platform {
        if let value = try QueryParameters(request)["platform"], !value.isEmpty { return try Platform(value) }
        return app.platforms.contains("ios") ? "ios" : app.platforms.first ?? "ios"
    }

    static func redirect(_ location: String, cookie: Cookie? = nil) -> Response {
        var response = Response(status: .seeOther, headers: [.location: location, .cacheControl: "no-store"])
        if let cookie { response.setCookie(cookie) }
        return response
    }

    /// After a write: this instance's snapshot is reloaded, and the browser goes to the overview.
    func written(app: AppID, platform: Platform, saved: String) async -> Response {
        await afterWrite()
        return Self.redirect("/dashboard/apps/\(app)?platform=\(DashboardForm.escape(platform))&saved=\(saved)")
    }
}
