import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}/releases/{version}?platform=`: the release's time to update, its health
/// beside the previous release's, and its prompt funnel.
enum ReleasePage {
    struct Model {
        var report: ReleaseReport
        var funnels: PromptFunnelReport
    }

    static func model(app: AppID, platform: Platform, version: Version, reports: ReportService) async throws -> Model {
        guard let report = try await reports.release(app: app, platform: platform, version: version) else {
            throw ProblemDetails.notFound("no release \(version) of \(app) on \(platform) (yet)")
        }
        return Model(report: report, funnels: try await reports.funnels(app: app, platform: platform, target: version))
    }

    static func view(_ model: Model) -> HTML {
        let report = model.report
        let figures: [(String, String)] = [
            ("Cohort", Figures.count(report.cohort)), ("Updated", Figures.count(report.updated)),
            ("By day 1", Figures.percent(report.updatedShare.day1)), ("By day 7", Figures.percent(report.updatedShare.day7)),
            ("By day 30", Figures.percent(report.updatedShare.day30)), ("Median", Figures.duration(seconds: report.medianSeconds)),
            ("p90", Figures.duration(seconds: report.p90Seconds)),
        ]
        let boxes = figures.map { item -> HTML in "<div class=\"figure\"><b>\(item.1)</b><span>\(item.0)</span></div>" }
        let curveRows = report.curve.map { point -> HTML in
            "<tr><th scope=\"row\">\(point.day)</th><td class=\"n\">\(Figures.count(point.updated))</td><td class=\"n\">\(Figures.percent(point.share))</td></tr>"
        }
        let health = report.health
        let healthBoxes: [(String, String)] =
            [("Exit-free install-days", Figures.percent(health.exitFreeShare))]
            + health.atAge.map { ("Exit-free on day \($0.day)", Figures.percent($0.exitFreeShare)) }
        let healthRows = health.days.map { day -> HTML in
            """
            <tr><th scope="row">\(day.day)</th><td>\(day.date)</td><td class="n">\(Figures.count(day.installs))</td>\
            <td class="n">\(Figures.count(day.exited))</td><td class="n">\(Figures.percent(day.exitFreeShare))</td>\
            <td class="n">\(Figures.percent(day.previousExitFreeShare))</td></tr>
            """
        }
        let previous: HTML =
            switch (health.previousVersion, health.baseline) {
            case (nil, _): "No baseline: no live release of this channel below \(report.version)."
            case (let version?, "compared"): "Compared with \(version), the previous release, at the same age."
            case (let version?, _): "No baseline: the previous release, \(version), has no abnormal exit on record."
            }
        let funnelRows = model.funnels.funnels.map { funnel -> HTML in
            """
            <tr><th scope="row">\(funnel.promptKind)</th><td class="n">\(Figures.count(funnel.shown))</td><td class="n">\(Figures.count(funnel.dismissedLater))</td>\
            <td class="n">\(Figures.count(funnel.dismissedSkip))</td><td class="n">\(Figures.count(funnel.updateStarted))</td>\
            <td class="n">\(Figures.count(funnel.blocked))</td><td class="n">\(Figures.count(funnel.converted))</td>\
            <td class="n">\(Figures.count(funnel.updatedAfterStart))</td></tr>
            """
        }
        let funnelTable: HTML =
            funnelRows.isEmpty
            ? "<p class=\"muted\">No prompt for \(report.version) has been shown yet.</p>"
            : """
                <div class="scroll"><table><thead><tr><th scope="col">Prompt</th><th class="n" scope="col">Shown</th>\
                <th class="n" scope="col">Later</th><th class="n" scope="col">Skipped</th><th class="n" scope="col">Started update</th>\
                <th class="n" scope="col">Blocked</th><th class="n" scope="col">Converted in 7 days</th>\
                <th class="n" scope="col">Updated in 7 days of starting</th></tr></thead><tbody>\(funnelRows)</tbody></table></div>
                """
        return """
            <p class="muted">Released \(report.releasedAt). Cohort: installs seen below \(report.version) before the release.</p>
            \(Figures.dataAsOf(report.dataAsOf, model.funnels.dataAsOf, eventsFrom: report.eventsFrom, model.funnels.eventsFrom))
            <div class="figures">\(boxes)</div>
            <h2 id="curve">Time to update</h2>
            <figure aria-labelledby="curve">\(CurveChart(points: report.curve).svg)</figure>
            <details><summary>The curve as a table</summary><div class="scroll"><table><thead><tr><th scope="col">Day</th>\
            <th class="n" scope="col">Updated</th><th class="n" scope="col">Share</th></tr></thead><tbody>\(curveRows)</tbody></table></div></details>
            <h2 id="health">Health</h2>
            <p class="muted">Installs active on \(report.version) each UTC day (as adoption counts them) that reported no \
            abnormal exit of it that day; \(ReleaseHealth.note). \(previous)</p>
            <div class="figures">\(healthBoxes.map { item -> HTML in "<div class=\"figure\"><b>\(item.1)</b><span>\(item.0)</span></div>" })</div>
            <details><summary>Health by day</summary><div class="scroll"><table><thead><tr><th scope="col">Day</th>\
            <th scope="col">Date</th><th class="n" scope="col">Active</th><th class="n" scope="col">Exited</th>\
            <th class="n" scope="col">Exit-free</th><th class="n" scope="col">Previous release, same age</th></tr></thead>\
            <tbody>\(healthRows)</tbody></table></div></details>
            <h2>Prompt funnel for \(report.version)</h2>\(funnelTable)
            """
    }
}

extension DashboardPages {
    @Sendable func release(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let platform = try platform(request, app)
        let version = try context.pathVersion()
        let model = try await ReleasePage.model(app: app.app.id, platform: platform, version: version, reports: reports)
        return Page.framed(
            identity, title: "\(app.app.name) \(model.report.version) · \(platform)", app: app.app.id, platform: platform,
            body: ReleasePage.view(model)
        ).response()
    }
}
