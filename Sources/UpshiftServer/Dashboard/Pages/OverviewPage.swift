import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}?platform=&days=`: adoption, daily actives, the policy and the releases
/// of one platform (with rollout controls for who may change them).
enum OverviewPage {
    static let rangeChoices = [7, 30, 90, 180]

    struct Model {
        var identity: Identity
        var app: AppCatalog
        var platform: Platform
        var days: Int
        var report: AdoptionReport
        /// Why the report is empty: the projections are not built yet (a first start on a long log), or
        /// the reports database (a replica) cannot be read; the policy and releases are shown all the same.
        var pending: String?
        var saved: Bool
        /// Said for as long as it holds, not only after the write that caused it.
        var warnings: [String]
        var now: Date
    }

    static func model(
        _ request: Request, identity: Identity, app: AppCatalog, platform: Platform, reports: ReportService, now: Date
    ) async throws -> Model {
        let today = UTCDay(now)
        let query = try QueryParameters(request)
        let days = try query.integer("days", default: 30, range: 1...AdoptionReport.maximumDays)
        let from = today.adding(days: -(days - 1))
        var pending: String?
        let report: AdoptionReport
        do {
            report = try await reports.adoption(app: app.app.id, platform: platform, from: from, to: today)
        } catch let error as ReportStore.NotReady {
            pending = "\(error.description); reload in a moment."
            report = AdoptionReport(app: app.app.id, platform: platform, from: from, to: today, rows: [], dataAsOf: nil)
        } catch let error as DatabaseUnavailable {
            // Counted by its pool; the rollout controls below read and write the primary and still work.
            pending = "The reports cannot be read right now (\(error.clientDetail)); reload in a moment."
            report = AdoptionReport(app: app.app.id, platform: platform, from: from, to: today, rows: [], dataAsOf: nil)
        }
        return Model(
            identity: identity, app: app, platform: platform, days: days, report: report, pending: pending,
            saved: query["saved"] != nil,
            warnings: app.policy(for: platform).warnings(among: app.releases(for: platform), platform: platform), now: now)
    }

    static func view(_ model: Model) -> HTML {
        let appId = model.app.app.id
        let chart = AdoptionChart(days: model.report.days)
        let base = "/dashboard/apps/\(appId)?platform=\(DashboardForm.escape(model.platform))"
        let ranges = rangeChoices.map { choice -> HTML in
            choice == model.days
                ? "<a aria-current=\"page\" href=\"\(base)&days=\(choice)\">\(choice) days</a>" : "<a href=\"\(base)&days=\(choice)\">\(choice) days</a>"
        }
        let platforms = Set(model.app.platforms).union([model.platform]).sorted().map { name -> HTML in
            let link = "/dashboard/apps/\(appId)?platform=\(DashboardForm.escape(name))&days=\(model.days)"
            return name == model.platform ? "<a aria-current=\"page\" href=\"\(link)\">\(name)</a>" : "<a href=\"\(link)\">\(name)</a>"
        }
        let legend = chart.legend.map { series -> HTML in "<li><span class=\"swatch \(series.style)\"></span>\(series.label)</li>" }
        let tableHead = chart.legend.map { series -> HTML in "<th class=\"n\" scope=\"col\">\(series.label)</th>" }
        let tableRows = chart.columns.map { column -> HTML in
            var shares = [Int](repeating: 0, count: chart.series.count)
            for segment in column.segments { shares[segment.series] = segment.installs }
            let cells = shares.reversed().map { installs -> HTML in
                "<td class=\"n\">\(column.activeInstalls == 0 ? "–" : Figures.percent(Double(installs) / Double(column.activeInstalls)))</td>"
            }
            return "<tr><th scope=\"row\">\(column.day)</th><td class=\"n\">\(Figures.count(column.activeInstalls))</td>\(cells)</tr>"
        }
        let active = CountChart(
            title: "Daily active installs", labels: model.report.days.map(\.day), values: model.report.days.map(\.activeInstalls))
        let saved: HTML = model.saved ? "<p class=\"notice ok\" role=\"status\">Saved.</p>" : ""
        let warnings = model.warnings.map { warning -> HTML in "<p class=\"notice error\" role=\"alert\">Warning: \(warning)</p>" }
        let pending: HTML = model.pending.map { "<p class=\"notice\" role=\"status\">\($0)</p>" } ?? ""
        return """
            \(saved)\(warnings)\(pending)<div class="choices" aria-label="Platform">Platform: \(platforms)</div>
            <div class="choices" aria-label="Range">Range: \(ranges)</div>
            <h2 id="adoption">Adoption</h2>\(model.pending == nil ? Figures.dataAsOf(model.report.dataAsOf, eventsFrom: model.report.eventsFrom) : "")
            <figure aria-labelledby="adoption">\(chart.svg)</figure>
            <ul class="legend" aria-label="Versions, newest first">\(legend)</ul>
            <details><summary>Adoption as a table</summary><div class="scroll"><table><thead><tr><th scope="col">Day</th>\
            <th class="n" scope="col">Active</th>\(tableHead)</tr></thead><tbody>\(tableRows)</tbody></table></div></details>
            <h2 id="active">Active installs per day</h2>
            <figure aria-labelledby="active">\(active.svg)</figure>
            \(policySummary(model))
            \(releasesTable(model))
            """
    }

    private static func policySummary(_ model: Model) -> HTML {
        let policy = model.app.policy(for: model.platform)
        func version(_ value: Version?) -> String { value?.normalized ?? "none" }
        let rows: [(String, String)] = [
            ("Enabled", policy.enabled ? "yes" : "no"),
            ("Minimum version", version(policy.minimumVersion)),
            ("Target version", version(policy.targetVersion)),
            ("Blocked versions", policy.blockedVersions.isEmpty ? "none" : policy.blockedVersions.map(\.normalized).joined(separator: ", ")),
            ("Notify after", policy.notifyAfterDays.map { "\(JSONNumber($0).literal) days" } ?? "at once"),
            ("Block after", policy.blockAfterDays.map { "\(JSONNumber($0).literal) days" } ?? "never"),
            ("Versions behind before a soft prompt", String(policy.versionsBehindThreshold)),
            ("Remind interval", Figures.duration(seconds: Double(policy.remindIntervalSeconds))),
            ("Check interval", Figures.duration(seconds: Double(policy.checkIntervalSeconds))),
            ("Users may skip a version", policy.allowSkip ? "yes" : "no"),
        ]
        let table = rows.map { row -> HTML in "<tr><th scope=\"row\">\(row.0)</th><td>\(row.1)</td></tr>" }
        let link: HTML =
            model.identity.mayWrite
            ? "<p><a href=\"/dashboard/apps/\(model.app.app.id)/rollout?platform=\(DashboardForm.escape(model.platform))\">Change the policy or raise the minimum</a></p>"
            : ""
        return """
            <h2>Policy <span class="muted">(revision \(policy.revision))</span></h2>
            <div class="scroll"><table><tbody>\(table)</tbody></table></div>\(link)
            """
    }

    private static func releasesTable(_ model: Model) -> HTML {
        let releases = model.app.releases(for: model.platform)
        guard !releases.isEmpty else { return "<h2>Releases</h2><p class=\"muted\">No releases on \(model.platform) yet.</p>" }
        let rows = releases.sorted { $0.version > $1.version }.map { release -> HTML in
            let percent = JSONNumber(release.rolloutPercent).literal
            var state: String =
                release.status == .withdrawn ? "withdrawn"
                : release.rolloutPaused ? "paused at \(percent)%"
                : release.rolloutPercent >= 100 ? "live" : "rolling out to \(percent)%"
            if let schedule = release.rolloutSchedule { state += "; " + scheduleSummary(schedule) }
            let link = "/dashboard/apps/\(model.app.app.id)/releases/\(release.version.normalized)?platform=\(DashboardForm.escape(model.platform))"
            let controls: HTML = model.identity.mayWrite && release.status == .live ? releaseControls(release, model) : ""
            return """
                <tr><th scope="row"><a href="\(link)">\(release.version.normalized)</a></th><td>\(Timestamp.format(release.releasedAt).prefix(10))</td>\
                <td>\(release.channel.rawValue)</td><td>\(release.minimumOSVersion?.normalized ?? "–")</td><td>\(state)</td></tr>\(controls)
                """
        }
        return """
            <h2>Releases</h2><div class="scroll"><table><thead><tr><th scope="col">Version</th><th scope="col">Released</th>\
            <th scope="col">Channel</th><th scope="col">Minimum OS</th><th scope="col">Rollout</th></tr></thead><tbody>\(rows)</tbody></table></div>
            """
    }

    /// A schedule in words: its kind, the step in force, and the next step and when (or why none comes).
    static func scheduleSummary(_ schedule: RolloutSchedule) -> String {
        let kind = schedule.kind == .appStore ? "App Store schedule" : "schedule"
        let position = "step \(schedule.step) of \(schedule.steps.count)"
        switch schedule.state {
        case .running:
            guard let next = schedule.next else { return "\(kind), \(position)" }
            return "\(kind), \(position); next: \(JSONNumber(next.step.percent).literal)% at \(Figures.minute(next.at))"
        case .paused:
            return "\(kind) paused at \(position); resumes by itself at \(schedule.resumesAt.map(Figures.minute) ?? "–")"
        case .halted:
            return "\(kind) halted at \(position)"
        case .held:
            return "\(kind) held by a rule at \(position): \(schedule.holdReason ?? "–")"
        }
    }

    /// Set the rollout, start or pause a schedule, halt or resume, release to everyone, withdraw: posted to
    /// the release (``DashboardPages/changeRelease``).
    private static func releaseControls(_ release: Release, _ model: Model) -> HTML {
        let action = "/dashboard/apps/\(model.app.app.id)/releases/\(release.version.normalized)"
        let id = "r-\(release.version.normalized.replacingOccurrences(of: ".", with: "-"))"
        let hidden = model.identity.writeFields(platform: model.platform, revision: release.revision)
        func button(_ action: ReleaseAction, _ label: String) -> HTML {
            "<button type=\"submit\" name=\"action\" value=\"\(action.rawValue)\">\(label)</button>"
        }
        var pause: [HTML] = [release.rolloutPaused ? button(.resume, "Resume") : button(.halt, "Pause")]
        switch release.rolloutSchedule?.state {
        case nil:
            // Offered where it can start: a schedule never takes back what a rollout already admits.
            if !release.rolloutPaused, release.releasedAt > model.now || release.rolloutPercent <= 1 {
                pause.append(button(.schedule, ReleaseAction.schedule.title))
            }
        case .running?: pause.append(button(.pauseSchedule, ReleaseAction.pauseSchedule.title))
        case .paused?: pause.append(button(.resume, "Resume schedule"))
        case .halted?, .held?: break
        }
        if release.rolloutPercent < 100 || release.rolloutPaused { pause.append(button(.release, ReleaseAction.release.title)) }
        return """
            <tr><td colspan="5"><form class="inline" method="post" action="\(action)" aria-label="Rollout of \(release.version.normalized)">\(hidden)\
            <label>Rollout %<input id="\(id)-percent" name="percent" type="number" min="0" max="100" step="0.01" value="\(JSONNumber(release.rolloutPercent).literal)" size="5"></label>\
            <label>Reason<input id="\(id)-reason" name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" placeholder="why"></label>\
            \(button(.rollout, "Set rollout"))\(pause)\
            <button class="danger" type="submit" name="action" value="\(ReleaseAction.withdraw.rawValue)">\(ReleaseAction.withdraw.title)</button></form></td></tr>
            """
    }
}

extension DashboardPages {
    @Sendable func overview(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let platform = try platform(request, app)
        let model = try await OverviewPage.model(
            request, identity: identity, app: app, platform: platform, reports: reports, now: clock.now())
        return Page.framed(identity, title: "\(app.app.name) · \(platform)", app: app.app.id, platform: platform, body: OverviewPage.view(model))
            .response()
    }
}
