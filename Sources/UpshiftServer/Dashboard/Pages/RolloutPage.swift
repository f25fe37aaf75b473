import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}/rollout?platform=[&candidate=&window=]`: preview who a new minimum would
/// block, apply it, and edit the policy (an admin token's page).
enum RolloutPage {
    struct Model {
        var identity: Identity
        var app: AppCatalog
        var platform: Platform
        var policy: Policy
        var window: Int
        var candidate: String
        var impact: MinimumImpactReport?
        /// What the check would answer the fleet before and after the previewed change (a minimum or a
        /// release change), and the release change itself (its form's fields).
        var backtest: BacktestReport?
        var change: ReleaseChangeBacktest?
        /// A policy as edited in the form and previewed (``DashboardPages/backtestPolicy``): shown in the form
        /// with the revision and the reason it was sent with, so that saving it saves what was previewed.
        var draft: PolicyDraft?
        /// A release not in the catalog yet, as the "Add a release" form posted it and previewed
        /// (``DashboardPages/backtestNewRelease``): its backtest, then the form again with "Add".
        var newRelease: RolloutForms.NewRelease?
        /// The application's clock when the page was made (the new release's default date).
        var now: Date
    }

    struct PolicyDraft {
        var policy: Policy
        var revision: Int
        var reason: String
    }

    /// A release change as the overview's form posts it (``RolloutForms/ReleaseChange``), previewed here.
    struct ReleaseChangeBacktest {
        var version: String
        var action: ReleaseAction
        var percent: String?

        var label: String {
            switch action {
            case .rollout: "\(version) to \(percent ?? "?") %"
            case .halt: "halt \(version)"
            case .resume: "resume \(version)"
            case .pauseSchedule: "pause the schedule of \(version)"
            case .schedule: "the App Store schedule for \(version)"
            case .release: "\(version) to everyone"
            case .withdraw: "withdraw \(version)"
            }
        }
    }

    static func model(
        _ request: Request, identity: Identity, app: AppCatalog, platform: Platform, reports: ReportService, now: Date,
        draft: PolicyDraft? = nil, newRelease: RolloutForms.NewRelease? = nil
    ) async throws -> Model {
        let query = try QueryParameters(request)
        let window = try query.integer(
            "window", default: MinimumImpactReport.defaultWindowDays, range: 1...MinimumImpactReport.maximumWindowDays)
        let candidate = query["candidate"] ?? ""
        var impact: MinimumImpactReport?
        if !candidate.isEmpty {
            guard let minimum = Version(candidate) else {
                throw ProblemDetails.badRequest("\(candidate) is not a version", field: "candidate")
            }
            impact = try await reports.minimumImpact(app: app.app.id, platform: platform, minimum: minimum, windowDays: window)
        }
        // The backtest of the previewed change: the candidate minimum, or a release change.
        var proposed: AppCatalog?
        var change: ReleaseChangeBacktest?
        if let draft {
            proposed = app
            proposed?.policies[platform] = draft.policy
        } else if let newRelease {
            do throws(FieldError) {
                proposed = try CatalogInput.proposal(
                    .object(["newReleases": .array([try newRelease.body(platform: platform)])]), to: app, platform: platform, now: now)
            } catch {
                throw CatalogError.invalid(error.field.hasPrefix("newReleases[0].") ? FieldError(
                    String(error.field.dropFirst("newReleases[0].".count)), error.message, kind: error.kind) : error)
            }
        } else if let minimum = Version(candidate) {
            proposed = app
            proposed?.policies[platform, default: Policy()].minimumVersion = minimum
        } else if let version = query["release"], !version.isEmpty {
            let form = RolloutForms.ReleaseChange(
                platform: platform.rawValue, revision: nil, reason: nil, action: query["action"], percent: query["percent"])
            change = ReleaseChangeBacktest(version: version, action: try form.releaseAction(), percent: query["percent"])
            let proposal: JSONValue = .object(["releases": .object([version: try form.patch()])])
            do throws(FieldError) {
                proposed = try CatalogInput.proposal(proposal, to: app, platform: platform, now: now)
            } catch {
                throw CatalogError.invalid(error)
            }
        }
        var backtest: BacktestReport?
        if let proposed {
            backtest = try await reports.backtest(
                app: app.app.id, platform: platform, windowDays: window, now: now, current: app, proposed: proposed)
        }
        return Model(
            identity: identity, app: app, platform: platform, policy: app.policy(for: platform), window: window,
            candidate: candidate, impact: impact, backtest: backtest, change: change, draft: draft, newRelease: newRelease,
            now: now)
    }

    /// Add a release, previewed first: what the check would answer the fleet once it is out, then "Add".
    static func newReleaseForm(_ model: Model) -> HTML {
        let appId = model.app.app.id
        let draft = model.newRelease
        let now = Timestamp.formatSeconds(model.now)
        let add: HTML =
            draft == nil
            ? "<p class=\"muted\">Preview the release to see what the check would answer; then add it.</p>"
            : "<button class=\"primary\" type=\"submit\">Add the release</button>"
        let backtest: HTML = draft == nil ? "" : model.backtest.map { backtestSection($0, title: "with \(draft?.version ?? "") out") } ?? ""
        return """
            <h2 id="new-release">Add a release</h2>
            \(backtest)
            <form class="stack" method="post" action="/dashboard/apps/\(appId)/new-release" aria-labelledby="new-release">\
            \(model.identity.writeFields(platform: model.platform, revision: 0))
            <label>Version<input name="version" required value="\(draft?.version ?? "")" placeholder="2.4.0"></label>
            <label>Released at (RFC 3339)<input name="releasedAt" required value="\(draft?.releasedAt ?? now)"></label>
            <label>Rollout %<input name="rolloutPercent" type="number" min="0" max="100" step="0.01" value="\(draft?.rolloutPercent ?? "100")"></label>
            <label>Minimum OS<input name="minimumOSVersion" value="\(draft?.minimumOSVersion ?? "")" placeholder="none"></label>
            <label>Release notes (\(model.app.app.defaultLocale), one line)<input name="note" value="\(draft?.note ?? "")"></label>
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" value="\(draft?.reason ?? "")"></label>
            <button type="submit" formaction="/dashboard/apps/\(appId)/new-release/preview">Preview the release</button>\
            \(add)</form>
            """
    }

    /// What the check would answer the fleet today and with the change, by action and reason.
    static func backtestSection(_ report: BacktestReport, title: String) -> HTML {
        let reasons = Set(report.today.reasons.keys).union(report.proposed.reasons.keys).sorted()
        func row(_ name: String, _ today: Int, _ proposed: Int) -> HTML {
            "<tr><th scope=\"row\">\(name)</th><td class=\"n\">\(Figures.count(today))</td><td class=\"n\">\(Figures.count(proposed))</td></tr>"
        }
        let actions = [
            row("force", report.today.force, report.proposed.force), row("soft", report.today.soft, report.proposed.soft),
            row("none", report.today.none, report.proposed.none),
        ]
        let byReason = reasons.map { row("reason \($0)", report.today.reasons[$0] ?? 0, report.proposed.reasons[$0] ?? 0) }
        return """
            <section aria-labelledby="backtest"><h3 id="backtest">What the check would answer: \(title)</h3>
            \(Figures.dataAsOf(report.dataAsOf, eventsFrom: report.eventsFrom))
            <div class="figures"><div class="figure"><b>\(Figures.count(report.installs))</b><span>installs active in \(report.windowDays) days</span></div>\
            <div class="figure"><b id="backtest-changed">\(Figures.count(report.changed))</b><span>would get another answer</span></div></div>
            <div class="scroll"><table><thead><tr><th scope="col">Answer</th><th class="n" scope="col">Today</th>\
            <th class="n" scope="col">With the change</th></tr></thead><tbody>\(actions)\(byReason)</tbody></table></div></section>
            """
    }

    /// Preview a change of one release before applying it: the same fields the overview posts.
    static func releaseChangeForm(_ model: Model) -> HTML {
        let releases = model.app.releases(for: model.platform).filter { $0.status == .live }
        guard !releases.isEmpty else { return "" }
        let versions = releases.map { release -> HTML in
            let selected = model.change?.version == release.version.text ? HTML(" selected") : ""
            return "<option value=\"\(release.version.text)\"\(selected)>\(release.version.text) (\(JSONNumber(release.rolloutPercent).literal) %)</option>"
        }
        let actions = ReleaseAction.allCases.map { action -> HTML in
            let selected = model.change?.action == action ? HTML(" selected") : ""
            return "<option value=\"\(action.rawValue)\"\(selected)>\(action.title)</option>"
        }
        return """
            <h2 id="release-change">Change a release</h2>
            <p class="muted">Preview what the check would answer the fleet before applying it.</p>
            <form class="inline" method="get" action="/dashboard/apps/\(model.app.app.id)/rollout" aria-labelledby="release-change">
            <input type="hidden" name="platform" value="\(model.platform)">
            <label>Release<select name="release">\(versions)</select></label>
            <label>Change<select name="action">\(actions)</select></label>
            <label>Rollout %<input name="percent" type="number" min="0" max="100" step="0.01" value="\(model.change?.percent ?? "")"></label>
            <label>Installs seen in the last (days)<input name="window" type="number" min="1" max="\(BacktestReport.maximumWindowDays)" value="\(model.window)"></label>
            <button type="submit">Preview the change</button></form>
            \(model.change.flatMap { change in model.backtest.map { backtestedChange(change, $0, model) } } ?? "")
            """
    }

    /// The backtest of a previewed release change, and the form that applies it.
    private static func backtestedChange(_ change: ReleaseChangeBacktest, _ report: BacktestReport, _ model: Model) -> HTML {
        guard let release = model.app.releases(for: model.platform).first(where: { $0.version.text == change.version }) else { return "" }
        let percent: HTML = change.percent.map { "<input type=\"hidden\" name=\"percent\" value=\"\($0)\">" } ?? ""
        return """
            \(backtestSection(report, title: change.label))
            <form class="inline" method="post" action="/dashboard/apps/\(model.app.app.id)/releases/\(release.version.normalized)" aria-label="Apply \(change.label)">
            \(model.identity.writeFields(platform: model.platform, revision: release.revision))<input type="hidden" name="action" value="\(change.action.rawValue)">\(percent)\
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)"></label>\
            <button class="primary" type="submit">Apply: \(change.label)</button></form>
            """
    }

    static func view(_ model: Model) -> HTML {
        let policy = model.draft?.policy ?? model.policy
        let appId = model.app.app.id
        let hidden = model.identity.writeFields(platform: model.platform, revision: model.draft?.revision ?? policy.revision)
        let draftBacktest: HTML =
            model.draft == nil ? "" : model.backtest.map { backtestSection($0, title: "the policy as edited below") } ?? ""
        func version(_ value: Version?) -> String { value?.normalized ?? "" }
        func optional(_ value: Double?) -> String { value.map { JSONNumber($0).literal } ?? "" }
        let preview: HTML = model.impact.map { impactSection($0, model) } ?? ""
        // Saved only once previewed: what the check would answer is on the page before the button is.
        let save: HTML =
            model.draft == nil
            ? "<p class=\"muted\">Preview the change to see what the check would answer; then save it.</p>"
            : "<button class=\"primary\" type=\"submit\">Save the policy</button>"
        let backtest: HTML =
            model.impact == nil ? "" : model.backtest.map { backtestSection($0, title: "minimum \(model.candidate)") } ?? ""
        return """
            <h2 id="raise">Raise the minimum version</h2>
            <p class="muted">Preview who a new minimum would block before applying it. Current minimum: \(version(policy.minimumVersion).isEmpty ? "none" : version(policy.minimumVersion)).</p>
            <form class="inline" method="get" action="/dashboard/apps/\(appId)/rollout" aria-labelledby="raise">
            <input type="hidden" name="platform" value="\(model.platform)">
            <label>Candidate minimum<input name="candidate" required value="\(model.candidate)" placeholder="2.0"></label>
            <label>Installs seen in the last (days)<input name="window" type="number" min="1" max="\(MinimumImpactReport.maximumWindowDays)" value="\(model.window)"></label>
            <button type="submit">Preview impact</button></form>
            \(preview)\(backtest)
            \(releaseChangeForm(model))
            \(newReleaseForm(model))
            <h2 id="policy">Policy <span class="muted">(revision \(model.policy.revision))</span></h2>
            \(draftBacktest)
            <form class="stack" method="post" action="/dashboard/apps/\(appId)/policy" aria-labelledby="policy">\(hidden)
            <label class="check"><input type="checkbox" name="enabled" value="true"\(policy.enabled ? HTML(" checked") : "")> Prompts enabled</label>
            <label>Minimum version<input name="minimumVersion" value="\(version(policy.minimumVersion))" placeholder="none"></label>
            <label>Target version<input name="targetVersion" value="\(version(policy.targetVersion))" placeholder="the latest release"></label>
            <label>Blocked versions (comma-separated)<input name="blockedVersions" value="\(policy.blockedVersions.map(\.normalized).joined(separator: ", "))"></label>
            <label>Notify after (days)<input name="notifyAfterDays" type="number" min="0" step="0.001" value="\(optional(policy.notifyAfterDays))"></label>
            <label>Block after (days)<input name="blockAfterDays" type="number" min="0" step="0.001" value="\(optional(policy.blockAfterDays))"></label>
            <label>Versions behind before a soft prompt<input name="versionsBehindThreshold" type="number" min="1" value="\(policy.versionsBehindThreshold)"></label>
            <label>Remind interval (seconds)<input name="remindIntervalSeconds" type="number" min="0" value="\(policy.remindIntervalSeconds)"></label>
            <label>Check interval (seconds)<input name="checkIntervalSeconds" type="number" min="0" value="\(policy.checkIntervalSeconds)"></label>
            <label class="check"><input type="checkbox" name="allowSkip" value="true"\(policy.allowSkip ? HTML(" checked") : "")> Users may skip a version</label>
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" value="\(model.draft?.reason ?? "")"></label>
            <button type="submit" formaction="/dashboard/apps/\(appId)/policy/preview">Preview the change</button>\
            \(save)</form>
            """
    }

    /// The preview's figures and tables: "would be blocked" is the same count in both (below the
    /// minimum and able to update); who cannot update on their OS is told `os_unsupported` instead.
    private static func impactSection(_ impact: MinimumImpactReport, _ model: Model) -> HTML {
        func rows(_ rows: [MinimumImpactReport.Row]) -> HTML {
            rows.map { row -> HTML in
                """
                <tr><th scope="row">\(row.value ?? "unknown")</th><td class="n">\(Figures.count(row.activeInstalls))</td>\
                <td class="n">\(Figures.count(row.below))</td><td class="n">\(Figures.count(row.wouldBeBlocked))</td>\
                <td class="n">\(Figures.count(row.unableToUpdate))</td></tr>
                """
            }.joined()
        }
        func table(_ title: String, _ body: HTML) -> HTML {
            """
            <div class="scroll"><table><thead><tr><th scope="col">\(title)</th><th class="n" scope="col">Active</th>\
            <th class="n" scope="col">Below</th><th class="n" scope="col">Would be blocked</th>\
            <th class="n" scope="col">Cannot update on their OS</th></tr></thead><tbody>\(body)</tbody></table></div>
            """
        }
        return """
            <section aria-labelledby="impact"><h3 id="impact">Impact of minimum \(impact.candidateMinimum)</h3>
            \(Figures.dataAsOf(impact.dataAsOf, eventsFrom: impact.eventsFrom))
            <div class="figures"><div class="figure"><b>\(Figures.count(impact.activeInstalls))</b><span>active in \(impact.windowDays) days</span></div>\
            <div class="figure"><b id="impact-below">\(Figures.count(impact.below))</b><span>below \(impact.candidateMinimum)</span></div>\
            <div class="figure"><b id="impact-blocked">\(Figures.count(impact.wouldBeBlocked))</b><span>would see a blocking screen</span></div>\
            <div class="figure"><b>\(Figures.count(impact.unableToUpdate))</b><span>cannot update on their OS (told os_unsupported)</span></div></div>
            \(table("Version", rows(impact.byVersion)))\(table("OS version", rows(impact.byOS)))
            \(applyMinimum(impact.candidateMinimum, model))</section>
            """
    }

    /// The form that applies a previewed minimum, or why it cannot be applied; with the warning a save
    /// would give when no live release meets it.
    private static func applyMinimum(_ minimum: String, _ model: Model) -> HTML {
        var applied = model.policy
        applied.minimumVersion = Version(minimum)
        // The rule `raiseMinimum` applies, so the button is only offered where it can succeed.
        do throws(FieldError) { try CatalogInput.checkMinimumBelowTarget(applied) } catch {
            return "<p class=\"notice\">Minimum \(minimum) cannot be applied: it \(error.message). Change the target in the policy first.</p>"
        }
        let warnings = applied.warnings(among: model.app.releases(for: model.platform), platform: model.platform)
            .map { warning -> HTML in "<p class=\"notice error\" role=\"alert\">Warning: \(warning)</p>" }
        return """
            \(warnings)<form class="inline" method="post" action="/dashboard/apps/\(model.app.app.id)/minimum" aria-label="Apply minimum \(minimum)">
            \(model.identity.writeFields(platform: model.platform, revision: model.policy.revision))<input type="hidden" name="minimumVersion" value="\(minimum)">\
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" placeholder="why raise the minimum"></label>\
            <button class="primary" type="submit">Apply minimum \(minimum)</button></form>
            """
    }
}

extension DashboardPages {
    @Sendable func rollout(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let platform = try platform(request, app)
        let model = try await RolloutPage.model(
            request, identity: identity, app: app, platform: platform, reports: reports, now: clock.now())
        return Page.framed(
            identity, title: "Rollout · \(app.app.name) · \(platform)", app: app.app.id, platform: platform,
            body: RolloutPage.view(model)
        ).response()
    }
}
