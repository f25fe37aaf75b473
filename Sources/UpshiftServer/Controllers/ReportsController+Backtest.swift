import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `POST /v1/apps/{app}/preview?platform=[&window=]` (read or admin token): the policy backtest. The body
/// proposes a policy, release edits and new releases in the admin API's shapes (``CatalogInput/proposal(_:to:platform:now:)``),
/// validated as those writes are; nothing is written. Every install active in the window, as
/// `install_state` knows it, goes through the decision engine under the catalog the check serves now and
/// under the proposed one (``Backtest``).
extension ReportsController {
    /// The route, relative to `/v1/apps/{app}`.
    func backtestRoutes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: authentication).add(middleware: RequireAccess(.read))
            .add(middleware: ReaderShare(shares: reports.readers))
            .post("preview", use: preview)
        return routes
    }

    @Sendable func preview(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let (app, platform, query) = try scope(request, context, allowed: ["platform", "window"])
        guard let current = snapshot.app(app)?.catalog else { throw CatalogError.appNotFound(app.rawValue) }
        let window = try query.integer(
            "window", default: BacktestReport.defaultWindowDays, range: 1...BacktestReport.maximumWindowDays)
        let body = try await CatalogController.json(request)
        // A release the platform does not have is not found, as for its PATCH.
        for key in body["releases"]?.objectValue?.keys.sorted() ?? [] {
            if let version = Version(key), current.release(platform: platform, version: version) == nil {
                throw CatalogError.releaseNotFound("\(key) of \(app) on \(platform)")
            }
        }
        let now = clock.now()
        // A new release whose version exists is a conflict, as for its POST.
        var seen: [Version] = []
        for release in try CatalogInput.newReleases(body, platform: platform, now: now) {
            if current.release(platform: platform, version: release.version) != nil || seen.contains(release.version) {
                throw CatalogError.releaseExists("\(platform) \(release.version.text)")
            }
            seen.append(release.version)
        }
        let proposed = try CatalogInput.proposal(body, to: current, platform: platform, now: now)
        let report = try await reports.backtest(
            app: app, platform: platform, windowDays: window, now: now, current: current, proposed: proposed)
        return try respond(request, report, csv: nil, name: "preview", dataAsOf: report.dataAsOf, eventsFrom: report.eventsFrom)
    }
}
