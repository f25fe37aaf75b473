import Foundation
import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import UpshiftCore
import UpshiftStore

/// The web dashboard at `/dashboard`: server-rendered HTML and SVG, no scripts. Sign-in takes a read or
/// admin token and starts a session stored in PostgreSQL (valid on every instance); read tokens see
/// reports, admin tokens also the rollout controls. Every form that changes state carries the
/// session's CSRF token, and the session cookie is `HttpOnly` and `SameSite=Strict`.
///
/// Writes go through `CatalogStore` with the revision the form was rendered with, exactly as the API's
/// `If-Match`: a stale form is refused and says so.
struct DashboardController: Sendable {
    let sessions: SessionStore
    let authenticator: KeyAuthenticator
    let catalog: CatalogStore
    let reports: ReportService
    let snapshot: CatalogSnapshot
    let clock: any WallClock
    /// Sign-in attempts per client address, taken before the form is read (the check's limit).
    let signInLimiter: RateLimiter
    let trustedProxies: Set<String>
    let afterWrite: @Sendable () async -> Void

    static let cookie = "upshift_session"
    static let sessionLifetime: TimeInterval = 12 * 3_600
    static let maximumForm = 64 * 1024
    static let rangeChoices = [7, 30, 90, 180]
    /// Only 5xx problems log, and those the page leaves to the problem middleware.
    static let logger = Logger(label: "upshift.dashboard")

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.get("/dashboard") { request, _ in
            try await page(request) {
                guard let session = try await session(request) else { return signInPage(error: nil) }
                return home(session)
            }
        }
        router.post("/dashboard/sign-in") { request, context in
            try await page(request) { try await signIn(request, context) }
        }
        router.post("/dashboard/sign-out") { request, _ in
            try await page(request) {
                _ = try await changing(request, admin: false, app: nil)
                if let token = request.cookies[Self.cookie]?.value { try await sessions.delete(token: token) }
                return redirect("/dashboard", cookie: sessionCookie("", maxAge: 0, request))
            }
        }
        router.get("/dashboard/apps/:app") { request, context in
            try await page(request) {
                let (session, app) = try await viewing(request, context)
                return try await overview(request, session: session, app: app)
            }
        }
        router.get("/dashboard/apps/:app/releases/:version") { request, context in
            try await page(request) {
                let (session, app) = try await viewing(request, context)
                return try await releasePage(request, context, session: session, app: app)
            }
        }
        router.get("/dashboard/apps/:app/rollout") { request, context in
            try await page(request) {
                let (session, app) = try await viewing(request, context)
                guard session.key.scope == .admin else {
                    throw ProblemDetails.forbidden("the rollout controls need an admin token; you signed in with a read token")
                }
                return try await rolloutPage(request, session: session, app: app)
            }
        }
        router.get("/dashboard/apps/:app/history") { request, context in
            try await page(request) {
                let (session, app) = try await viewing(request, context)
                return try await historyPage(request, session: session, app: app)
            }
        }
        router.post("/dashboard/apps/:app/policy") { request, context in
            try await page(request) { try await savePolicy(request, context) }
        }
        router.post("/dashboard/apps/:app/minimum") { request, context in
            try await page(request) { try await raiseMinimum(request, context) }
        }
        router.post("/dashboard/apps/:app/releases/:version") { request, context in
            try await page(request) { try await changeRelease(request, context) }
        }
    }

    // MARK: Sessions and guards

    private func session(_ request: Request) async throws -> DashboardSession? {
        guard let token = request.cookies[Self.cookie]?.value, !token.isEmpty else { return nil }
        return try await sessions.find(token: token, now: clock.now())
    }

    /// A page that shows an app: a session whose key covers it, and an app that exists.
    private func viewing(_ request: Request, _ context: UpshiftRequestContext) async throws -> (DashboardSession, AppCatalog) {
        guard let session = try await session(request) else { throw SignInRequired() }
        let appId = try context.appId()
        guard session.key.covers(app: appId) else { throw ProblemDetails.forbidden("your token does not cover app \(appId)") }
        guard let app = try await catalog.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
        return (session, app)
    }

    /// A form that changes state: same origin, a session, its CSRF token, and (for catalog writes) an
    /// admin key covering the app. Returns the session and the form's fields.
    private func changing(_ request: Request, admin: Bool, app: String?) async throws -> (DashboardSession, [String: String]) {
        try sameOrigin(request)
        guard let session = try await session(request) else { throw SignInRequired() }
        let form = try await Form.read(request, limit: Self.maximumForm)
        guard let sent = form["csrf"], constantTimeEqual(sent, session.csrfToken) else {
            throw ProblemDetails.forbidden("this form is not from your session (missing or wrong CSRF token); reload the page")
        }
        if admin {
            guard session.key.scope == .admin else { throw ProblemDetails.forbidden("changing the rollout needs an admin token") }
            if let app, !session.key.covers(app: app) { throw ProblemDetails.forbidden("your token does not cover app \(app)") }
        }
        return (session, form)
    }

    /// Browsers send `Origin` with every POST; one from another site is refused even before the
    /// session is looked at (SameSite=Strict already keeps the cookie away from it).
    private func sameOrigin(_ request: Request) throws {
        guard let origin = request.headers[.origin] else { return }
        let host = request.head.authority ?? ""
        guard origin.utf8.count <= 2_048, let url = URL(string: origin), let originHost = url.host else {
            throw ProblemDetails.forbidden("cross-site form submissions are refused")
        }
        let originAuthority = url.port.map { "\(originHost):\($0)" } ?? originHost
        guard originAuthority.lowercased() == host.lowercased() else {
            throw ProblemDetails.forbidden("cross-site form submissions are refused")
        }
    }

    /// `Secure` when a proxy says the browser spoke HTTPS (`X-Forwarded-Proto: https`). Trusting the header
    /// is harmless here: `Secure` only keeps the cookie off plain HTTP.
    private func sessionCookie(_ value: String, maxAge: Int, _ request: Request) -> String {
        let https = request.headers[.xForwardedProto]?.lowercased() == "https"
        return "\(Self.cookie)=\(value); Path=/dashboard; Max-Age=\(maxAge); HttpOnly; SameSite=Strict" + (https ? "; Secure" : "")
    }

    private func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
        let (left, right) = (Array(lhs.utf8), Array(rhs.utf8))
        guard left.count == right.count else { return false }
        return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }

    private struct SignInRequired: Error {}

    /// Renders what `body` returns; problems become an HTML page with their status, and a missing
    /// session sends the browser to the sign-in form.
    private func page(_ request: Request, _ body: () async throws -> Response) async throws -> Response {
        do {
            return try await body()
        } catch is SignInRequired {
            return request.method == .get ? redirect("/dashboard") : signInPage(error: "Your session has ended; sign in again.", status: .unauthorized)
        } catch let error where !Database.isConnectionError(error) {
            // Every client mistake, as the API maps it, on a page; anything else goes to the JSON
            // problem middleware (a 503 or a logged 500).
            let problem = ProblemDetails.from(error, logger: Self.logger)
            guard problem.status.code < 500 else { throw error }
            return problemPage(problem)
        }
    }

    private func problemPage(_ problem: ProblemDetails) -> Response {
        var detail = problem.detail ?? problem.title
        if problem.type == "urn:upshift:problem:stale" {
            detail = "Someone changed this since you loaded the form, so nothing was saved. Go back, reload the page and check the current values before trying again."
        }
        let body: HTML = """
            <p class="notice error" role="alert">\(detail)</p><p><a href="/dashboard">Back to the dashboard</a></p>
            """
        return Page(title: problem.title, body: body).response(status: problem.status)
    }

    private func redirect(_ location: String, cookie: String? = nil) -> Response {
        var headers: HTTPFields = [.location: location, .cacheControl: "no-store"]
        if let cookie { headers[.setCookie] = cookie }
        return Response(status: .seeOther, headers: headers)
    }

    private func frame(_ session: DashboardSession, title: String, app: String? = nil, platform: String? = nil, body: HTML) -> Page {
        var navigation: [(String, String)] = [("Apps", "/dashboard")]
        if let app {
            let query = platform.map { "?platform=\(Form.escape($0))" } ?? ""
            navigation.append(("Overview", "/dashboard/apps/\(app)\(query)"))
            if session.key.scope == .admin { navigation.append(("Rollout", "/dashboard/apps/\(app)/rollout\(query)")) }
            navigation.append(("History", "/dashboard/apps/\(app)/history"))
        }
        return Page(
            title: title, signedIn: (session.key.name, session.key.scope.rawValue, session.csrfToken),
            navigation: navigation, body: body)
    }

    // MARK: Sign-in

    private func signInPage(error: String?, status: HTTPResponse.Status = .ok) -> Response {
        let notice: HTML = error.map { "<p class=\"notice error\" role=\"alert\">\($0)</p>" } ?? ""
        let body: HTML = """
            \(notice)<form class="stack" method="post" action="/dashboard/sign-in">
            <label>Read or admin token<input type="password" name="token" autocomplete="current-password" required \
            placeholder="upshift_read_…" aria-describedby="token-help"></label>
            <p id="token-help" class="muted">Create one with <code>upshift keys create --scope read --name NAME</code>. Read tokens see \
            reports; admin tokens also change rollouts.</p>
            <button class="primary" type="submit">Sign in</button></form>
            """
        return Page(title: "Sign in", body: body).response(status: status)
    }

    private func signIn(_ request: Request, _ context: UpshiftRequestContext) async throws -> Response {
        let client = ClientAddress.of(request, context, trustedProxies: trustedProxies)
        try signInLimiter.enforce(client, detail: "too many sign-in attempts from your address; wait a moment")
        try sameOrigin(request)
        let form = try await Form.read(request, limit: Self.maximumForm)
        let token = (form["token"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard let key = authenticator.key(secret: token), key.scope != .ingest else {
            return signInPage(error: "That token is unknown, revoked, or an ingest key. Use a read or admin token.", status: .unauthorized)
        }
        let (secret, _) = try await sessions.create(key: key, now: clock.now(), lifetime: Self.sessionLifetime)
        return redirect(
            "/dashboard",
            cookie: sessionCookie(secret, maxAge: Int(Self.sessionLifetime), request))
    }

    private func home(_ session: DashboardSession) -> Response {
        let apps = snapshot.appIds.filter { session.key.covers(app: $0) }
        let rows = apps.compactMap { snapshot.app($0)?.catalog }.map { app -> HTML in
            let links = app.platforms.map { platform -> HTML in
                "<a href=\"/dashboard/apps/\(app.app.id)?platform=\(Form.escape(platform))\">\(platform)</a> "
            }
            return "<tr><td><a href=\"/dashboard/apps/\(app.app.id)\">\(app.app.name)</a> <span class=\"muted\">\(app.app.id)</span></td><td>\(links)</td></tr>"
        }
        let body: HTML =
            rows.isEmpty
            ? "<p class=\"notice\">No apps yet. Create one with <code>upshift apps create</code>, or load the demo with <code>upshift demo</code>.</p>"
            : "<div class=\"scroll\"><table><thead><tr><th>App</th><th>Platforms</th></tr></thead><tbody>\(rows)</tbody></table></div>"
        return frame(session, title: "Apps", body: body).response()
    }

    // MARK: Overview

    private func platform(_ request: Request, _ app: AppCatalog) throws -> String {
        if let value = try QueryParameters(request)["platform"], !value.isEmpty {
            guard EventValidator.isPlatform(value) else { throw ProblemDetails.badRequest("\(value) is not a platform name", field: "platform") }
            return value
        }
        return app.platforms.contains("ios") ? "ios" : app.platforms.first ?? "ios"
    }

    private func overview(_ request: Request, session: DashboardSession, app: AppCatalog) async throws -> Response {
        let platform = try platform(request, app)
        let days = try QueryParameters(request).integer("days", default: 30, range: 1...AdoptionReport.maximumDays)
        let today = UTCDay(clock.now())
        let from = today.adding(days: -(days - 1))
        // Reports not built yet (a first start on a long log) leave the catalog on the page, with a word.
        var pending: HTML = ""
        let report: AdoptionReport
        do {
            report = try await reports.adoption(app: app.app.id, platform: platform, from: from, to: today)
        } catch let problem as ProblemDetails where problem.status == .serviceUnavailable {
            pending = "<p class=\"notice\" role=\"status\">\(problem.detail ?? "The reports are not ready yet; reload in a moment.")</p>"
            report = AdoptionReport(app: app.app.id, platform: platform, from: from, to: today, rows: [])
        }
        let chart = AdoptionChart(days: report.days)
        let base = "/dashboard/apps/\(app.app.id)?platform=\(Form.escape(platform))"
        let ranges = Self.rangeChoices.map { choice -> HTML in
            choice == days ? "<a aria-current=\"page\" href=\"\(base)&days=\(choice)\">\(choice) days</a>" : "<a href=\"\(base)&days=\(choice)\">\(choice) days</a>"
        }
        let platforms = Set(app.platforms).union([platform]).sorted().map { name -> HTML in
            name == platform ? "<a aria-current=\"page\" href=\"/dashboard/apps/\(app.app.id)?platform=\(Form.escape(name))&days=\(days)\">\(name)</a>"
                : "<a href=\"/dashboard/apps/\(app.app.id)?platform=\(Form.escape(name))&days=\(days)\">\(name)</a>"
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
            title: "Daily active installs", labels: report.days.map(\.day), values: report.days.map(\.activeInstalls))
        let saved: HTML = try QueryParameters(request)["saved"] != nil ? "<p class=\"notice ok\" role=\"status\">Saved.</p>" : ""
        // Shown for as long as it holds, not only after the write that caused it.
        let warnings = app.policy(for: platform).warnings(among: app.releases(for: platform), platform: platform)
            .map { warning -> HTML in "<p class=\"notice error\" role=\"alert\">Warning: \(warning)</p>" }
        let body: HTML = """
            \(saved)\(warnings)\(pending)<div class="choices" aria-label="Platform">Platform: \(platforms)</div>
            <div class="choices" aria-label="Range">Range: \(ranges)</div>
            <h2 id="adoption">Adoption</h2>
            <figure aria-labelledby="adoption">\(chart.svg)</figure>
            <ul class="legend" aria-label="Versions, newest first">\(legend)</ul>
            <details><summary>Adoption as a table</summary><div class="scroll"><table><thead><tr><th scope="col">Day</th>\
            <th class="n" scope="col">Active</th>\(tableHead)</tr></thead><tbody>\(tableRows)</tbody></table></div></details>
            <h2 id="active">Active installs per day</h2>
            <figure aria-labelledby="active">\(active.svg)</figure>
            \(policySummary(app.policy(for: platform), admin: session.key.scope == .admin, app: app.app.id, platform: platform))
            \(releasesTable(app.releases(for: platform), session: session, app: app.app.id, platform: platform))
            """
        return frame(session, title: "\(app.app.name) · \(platform)", app: app.app.id, platform: platform, body: body).response()
    }

    private func policySummary(_ policy: Policy, admin: Bool, app: String, platform: String) -> HTML {
        func version(_ value: Version?) -> String { value?.normalized ?? "none" }
        let rows: [(String, String)] = [
            ("Enabled", policy.enabled ? "yes" : "no"),
            ("Minimum version", version(policy.minimumVersion)),
            ("Target version", version(policy.targetVersion)),
            ("Blocked versions", policy.blockedVersions.isEmpty ? "none" : policy.blockedVersions.map(\.normalized).joined(separator: ", ")),
            ("Notify after", policy.notifyAfterDays.map { "\(Self.number($0)) days" } ?? "at once"),
            ("Block after", policy.blockAfterDays.map { "\(Self.number($0)) days" } ?? "never"),
            ("Versions behind before a soft prompt", String(policy.versionsBehindThreshold)),
            ("Remind interval", Figures.duration(seconds: Double(policy.remindIntervalSeconds))),
            ("Check interval", Figures.duration(seconds: Double(policy.checkIntervalSeconds))),
            ("Users may skip a version", policy.allowSkip ? "yes" : "no"),
        ]
        let table = rows.map { row -> HTML in "<tr><th scope=\"row\">\(row.0)</th><td>\(row.1)</td></tr>" }
        let link: HTML = admin ? "<p><a href=\"/dashboard/apps/\(app)/rollout?platform=\(Form.escape(platform))\">Change the policy or raise the minimum</a></p>" : ""
        return """
            <h2>Policy <span class="muted">(revision \(policy.revision))</span></h2>
            <div class="scroll"><table><tbody>\(table)</tbody></table></div>\(link)
            """
    }

    private func releasesTable(_ releases: [Release], session: DashboardSession, app: String, platform: String) -> HTML {
        guard !releases.isEmpty else { return "<h2>Releases</h2><p class=\"muted\">No releases on \(platform) yet.</p>" }
        let admin = session.key.scope == .admin
        let rows = releases.sorted { $0.version > $1.version }.map { release -> HTML in
            let state: String =
                release.status == .withdrawn ? "withdrawn"
                : release.rolloutPaused ? "paused at \(Self.number(release.rolloutPercent))%"
                : release.rolloutPercent >= 100 ? "live" : "rolling out to \(Self.number(release.rolloutPercent))%"
            let link = "/dashboard/apps/\(app)/releases/\(release.version.normalized)?platform=\(Form.escape(platform))"
            let controls: HTML = admin && release.status == .live ? releaseControls(release, session: session, app: app, platform: platform) : ""
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

    private func releaseControls(_ release: Release, session: DashboardSession, app: String, platform: String) -> HTML {
        let action = "/dashboard/apps/\(app)/releases/\(release.version.normalized)"
        let id = "r-\(release.version.normalized.replacingOccurrences(of: ".", with: "-"))"
        let hidden = writeFields(session, platform: platform, revision: release.revision)
        let pause: HTML = release.rolloutPaused
            ? "<button type=\"submit\" name=\"action\" value=\"resume\">Resume</button>"
            : "<button type=\"submit\" name=\"action\" value=\"pause\">Pause</button>"
        return """
            <tr><td colspan="5"><form class="inline" method="post" action="\(action)" aria-label="Rollout of \(release.version.normalized)">\(hidden)\
            <label>Rollout %<input id="\(id)-percent" name="percent" type="number" min="0" max="100" step="0.01" value="\(Self.number(release.rolloutPercent))" size="5"></label>\
            <label>Reason<input id="\(id)-reason" name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" placeholder="why"></label>\
            <button type="submit" name="action" value="rollout">Set rollout</button>\(pause)\
            <button class="danger" type="submit" name="action" value="withdraw">Withdraw</button></form></td></tr>
            """
    }

    // MARK: Release page

    private func releasePage(
        _ request: Request, _ context: UpshiftRequestContext, session: DashboardSession, app: AppCatalog
    ) async throws -> Response {
        let platform = try platform(request, app)
        let version = try context.pathVersion()
        guard let report = try await reports.release(app: app.app.id, platform: platform, version: version) else {
            throw ProblemDetails.notFound("no release \(version) of \(app.app.id) on \(platform) (yet)")
        }
        let funnels = try await reports.funnels(app: app.app.id, platform: platform, target: version)
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
        let funnelRows = funnels.funnels.map { funnel -> HTML in
            """
            <tr><th scope="row">\(funnel.promptKind)</th><td class="n">\(Figures.count(funnel.shown))</td><td class="n">\(Figures.count(funnel.dismissedLater))</td>\
            <td class="n">\(Figures.count(funnel.dismissedSkip))</td><td class="n">\(Figures.count(funnel.updateStarted))</td>\
            <td class="n">\(Figures.count(funnel.blocked))</td><td class="n">\(Figures.count(funnel.converted))</td></tr>
            """
        }
        let funnelTable: HTML =
            funnelRows.isEmpty
            ? "<p class=\"muted\">No prompt for \(report.version) has been shown yet.</p>"
            : """
                <div class="scroll"><table><thead><tr><th scope="col">Prompt</th><th class="n" scope="col">Shown</th>\
                <th class="n" scope="col">Later</th><th class="n" scope="col">Skipped</th><th class="n" scope="col">Started update</th>\
                <th class="n" scope="col">Blocked</th><th class="n" scope="col">Converted in 7 days</th></tr></thead><tbody>\(funnelRows)</tbody></table></div>
                """
        let body: HTML = """
            <p class="muted">Released \(report.releasedAt). Cohort: installs seen below \(report.version) before the release.</p>
            <div class="figures">\(boxes)</div>
            <h2 id="curve">Time to update</h2>
            <figure aria-labelledby="curve">\(CurveChart(points: report.curve).svg)</figure>
            <details><summary>The curve as a table</summary><div class="scroll"><table><thead><tr><th scope="col">Day</th>\
            <th class="n" scope="col">Updated</th><th class="n" scope="col">Share</th></tr></thead><tbody>\(curveRows)</tbody></table></div></details>
            <h2>Prompt funnel for \(report.version)</h2>\(funnelTable)
            """
        return frame(session, title: "\(app.app.name) \(report.version) · \(platform)", app: app.app.id, platform: platform, body: body)
            .response()
    }

    // MARK: Rollout controls

    private func rolloutPage(_ request: Request, session: DashboardSession, app: AppCatalog) async throws -> Response {
        let platform = try platform(request, app)
        let policy = app.policy(for: platform)
        let query = try QueryParameters(request)
        let window = try query.integer(
            "window", default: MinimumImpactReport.defaultWindowDays, range: 1...MinimumImpactReport.maximumWindowDays)
        let candidateText = query["candidate"] ?? ""
        var preview: HTML = ""
        if !candidateText.isEmpty {
            guard let candidate = Version(candidateText) else {
                throw ProblemDetails.badRequest("\(candidateText) is not a version", field: "candidate")
            }
            let impact = try await reports.minimumImpact(app: app.app.id, platform: platform, minimum: candidate, windowDays: window)
            preview = impactSection(impact, policy: policy, session: session, app: app.app.id, platform: platform)
        }
        let hidden = writeFields(session, platform: platform, revision: policy.revision)
        func version(_ value: Version?) -> String { value?.normalized ?? "" }
        func optional(_ value: Double?) -> String { value.map(Self.number) ?? "" }
        let body: HTML = """
            <h2 id="raise">Raise the minimum version</h2>
            <p class="muted">Preview who a new minimum would block before applying it. Current minimum: \(version(policy.minimumVersion).isEmpty ? "none" : version(policy.minimumVersion)).</p>
            <form class="inline" method="get" action="/dashboard/apps/\(app.app.id)/rollout" aria-labelledby="raise">
            <input type="hidden" name="platform" value="\(platform)">
            <label>Candidate minimum<input name="candidate" required value="\(candidateText)" placeholder="2.0"></label>
            <label>Installs seen in the last (days)<input name="window" type="number" min="1" max="\(MinimumImpactReport.maximumWindowDays)" value="\(window)"></label>
            <button type="submit">Preview impact</button></form>
            \(preview)
            <h2 id="policy">Policy <span class="muted">(revision \(policy.revision))</span></h2>
            <form class="stack" method="post" action="/dashboard/apps/\(app.app.id)/policy" aria-labelledby="policy">\(hidden)
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
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)"></label>
            <button class="primary" type="submit">Save the policy</button></form>
            """
        return frame(session, title: "Rollout · \(app.app.name) · \(platform)", app: app.app.id, platform: platform, body: body).response()
    }

    private func impactSection(
        _ impact: MinimumImpactReport, policy: Policy, session: DashboardSession, app: String, platform: String
    ) -> HTML {
        func rows(_ rows: [MinimumImpactReport.Row]) -> HTML {
            rows.map { row -> HTML in
                """
                <tr><th scope="row">\(row.value ?? "unknown")</th><td class="n">\(Figures.count(row.activeInstalls))</td>\
                <td class="n">\(Figures.count(row.below))</td><td class="n">\(Figures.count(row.unableToUpdate))</td></tr>
                """
            }.joined()
        }
        func table(_ title: String, _ body: HTML) -> HTML {
            """
            <div class="scroll"><table><thead><tr><th scope="col">\(title)</th><th class="n" scope="col">Active</th>\
            <th class="n" scope="col">Would be blocked</th><th class="n" scope="col">Cannot update on their OS</th></tr></thead><tbody>\(body)</tbody></table></div>
            """
        }
        let blocked = impact.below - impact.unableToUpdate
        return """
            <section aria-labelledby="impact"><h3 id="impact">Impact of minimum \(impact.candidateMinimum)</h3>
            <div class="figures"><div class="figure"><b>\(Figures.count(impact.activeInstalls))</b><span>active in \(impact.windowDays) days</span></div>\
            <div class="figure"><b id="impact-below">\(Figures.count(impact.below))</b><span>below \(impact.candidateMinimum)</span></div>\
            <div class="figure"><b id="impact-blocked">\(Figures.count(blocked))</b><span>would see a blocking screen</span></div>\
            <div class="figure"><b>\(Figures.count(impact.unableToUpdate))</b><span>cannot update on their OS (told os_unsupported)</span></div></div>
            \(table("Version", rows(impact.byVersion)))\(table("OS version", rows(impact.byOS)))
            \(applyMinimum(impact.candidateMinimum, policy: policy, session: session, app: app, platform: platform))</section>
            """
    }

    /// The form that applies a previewed minimum, or why it cannot be applied.
    private func applyMinimum(_ minimum: String, policy: Policy, session: DashboardSession, app: String, platform: String) -> HTML {
        // The rule `raiseMinimum` applies, so the button is only offered where it can succeed.
        var applied = policy
        applied.minimumVersion = Version(minimum)
        do throws(FieldError) { try CatalogInput.checkMinimumBelowTarget(applied) } catch {
            return "<p class=\"notice\">Minimum \(minimum) cannot be applied: it \(error.message). Change the target in the policy first.</p>"
        }
        return """
            <form class="inline" method="post" action="/dashboard/apps/\(app)/minimum" aria-label="Apply minimum \(minimum)">
            \(writeFields(session, platform: platform, revision: policy.revision))<input type="hidden" name="minimumVersion" value="\(minimum)">\
            <label>Reason (required)<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)" placeholder="why raise the minimum"></label>\
            <button class="primary" type="submit">Apply minimum \(minimum)</button></form>
            """
    }

    private func savePolicy(_ request: Request, _ context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        let (session, form) = try await changing(request, admin: true, app: appId)
        let (platform, revision, reason) = try writeContext(form)
        var body: [String: JSONValue] = [
            "enabled": .bool(form["enabled"] == "true"),
            "allowSkip": .bool(form["allowSkip"] == "true"),
            "blockedVersions": .array(
                (form["blockedVersions"] ?? "").split(separator: ",").map { .string($0.trimmingCharacters(in: .whitespaces)) }
                    .filter { $0.stringValue?.isEmpty == false }),
        ]
        for name in ["minimumVersion", "targetVersion"] {
            if let text = form[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty { body[name] = .string(text) }
        }
        for name in ["notifyAfterDays", "blockAfterDays", "versionsBehindThreshold", "remindIntervalSeconds", "checkIntervalSeconds"] {
            guard let text = form[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { continue }
            guard let number = JSONNumber(literal: text) else {
                throw ProblemDetails.badRequest("\(name): \(text) is not a number", field: name)
            }
            body[name] = .number(number)
        }
        let policy = try CatalogInput.policy(.object(body))
        return try await store(policy, app: appId, platform: platform, revision: revision, reason: reason, session: session)
    }

    /// Replaces the policy if it is still at the revision the form showed, then back to the overview.
    private func store(
        _ policy: Policy, app appId: String, platform: String, revision: Int, reason: String, session: DashboardSession
    ) async throws -> Response {
        _ = try await catalog.replacePolicy(
            appId: appId, platform: platform, policy, expectedRevision: revision, actor: session.key.actor, reason: reason,
            now: clock.now())
        await afterWrite()
        return redirect("/dashboard/apps/\(appId)?platform=\(Form.escape(platform))&saved=policy")
    }

    /// Applies a previewed minimum to the policy the preview was made against (its revision).
    private func raiseMinimum(_ request: Request, _ context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        let (session, form) = try await changing(request, admin: true, app: appId)
        let (platform, revision, reason) = try writeContext(form)
        guard let text = form["minimumVersion"], let minimum = Version(text) else {
            throw ProblemDetails.badRequest("minimumVersion: not a version", field: "minimumVersion")
        }
        guard let app = try await catalog.app(id: appId) else { throw ProblemDetails.notFound("no app \(appId)") }
        // The rest of the policy as it is now; `store` refuses it if that is not the revision the preview showed.
        var policy = app.policy(for: platform)
        policy.minimumVersion = minimum
        do throws(FieldError) { try CatalogInput.checkMinimumBelowTarget(policy) } catch { throw CatalogError.invalid(error) }
        return try await store(policy, app: appId, platform: platform, revision: revision, reason: reason, session: session)
    }

    private func changeRelease(_ request: Request, _ context: UpshiftRequestContext) async throws -> Response {
        let appId = try context.appId()
        let (session, form) = try await changing(request, admin: true, app: appId)
        let (platform, revision, reason) = try writeContext(form)
        let version = try context.pathVersion()
        let patch: [String: JSONValue]
        switch form["action"] ?? "" {
        case "rollout":
            guard let percent = form["percent"].flatMap({ JSONNumber(literal: $0.trimmingCharacters(in: .whitespaces)) }) else {
                throw ProblemDetails.badRequest("percent: a number from 0 to 100", field: "percent")
            }
            patch = ["rolloutPercent": .number(percent)]
        case "pause": patch = ["rolloutPaused": .bool(true)]
        case "resume": patch = ["rolloutPaused": .bool(false)]
        case "withdraw": patch = ["status": .string(ReleaseStatus.withdrawn.rawValue)]
        default: throw ProblemDetails.badRequest("action: rollout, pause, resume or withdraw", field: "action")
        }
        _ = try await catalog.updateRelease(
            appId: appId, platform: platform, version: version, expectedRevision: revision, actor: session.key.actor,
            reason: reason, now: clock.now()
        ) { release in
            do throws(FieldError) { return try CatalogInput.releasePatch(.object(patch), to: release) } catch {
                throw CatalogError.invalid(error)
            }
        }
        await afterWrite()
        return redirect("/dashboard/apps/\(appId)?platform=\(Form.escape(platform))&saved=release")
    }

    /// The hidden fields of every catalog form: what `changing` and `writeContext` read back.
    private func writeFields(_ session: DashboardSession, platform: String, revision: Int) -> HTML {
        """
        <input type="hidden" name="csrf" value="\(session.csrfToken)"><input type="hidden" name="platform" value="\(platform)">\
        <input type="hidden" name="revision" value="\(revision)">
        """
    }

    /// The platform, the revision the form was rendered with, and the required reason.
    private func writeContext(_ form: [String: String]) throws -> (platform: String, revision: Int, reason: String) {
        guard let platform = form["platform"], EventValidator.isPlatform(platform) else {
            throw ProblemDetails.badRequest("platform: not a platform name", field: "platform")
        }
        guard let revision = form["revision"].flatMap({ JSONNumber(literal: $0)?.integer(in: 0...Int(Int64.max)) }) else {
            throw ProblemDetails.badRequest("revision: missing; reload the page", field: "revision")
        }
        let reason = (form["reason"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !reason.isEmpty else { throw ProblemDetails.badRequest("reason: say why (it goes into the history)", field: "reason") }
        try CatalogInput.checkText(
            reason, field: "reason", maximumLength: CatalogInput.maximumReasonLength, lineBreaks: true)
        return (platform, revision, reason)
    }

    // MARK: History

    static let historyPage = 50

    /// Newest first, `historyPage` at a time; `before` (a stream version) pages back to the app's creation.
    private func historyPage(_ request: Request, session: DashboardSession, app: AppCatalog) async throws -> Response {
        let query = try QueryParameters(request)
        let before = try query["before"].map { _ in try query.integer("before", default: 0, range: 1...Int(Int32.max)) }
        // One more than shown tells whether an older page exists.
        let entries = try await catalog.history(appId: app.app.id, before: before, limit: Self.historyPage + 1)
        let shown = entries.prefix(Self.historyPage)
        let rows = shown.map { entry -> HTML in
            let subject = [entry.platform, entry.releaseVersion].compactMap { $0 }.joined(separator: " ")
            let changes = entry.changes.keys.sorted().map { field -> HTML in
                let change = entry.changes[field]!
                return "<li><b>\(field)</b>: \(Self.describe(change.from)) → \(Self.describe(change.to))</li>"
            }
            return """
                <tr><td>\(Timestamp.format(entry.at))</td><td>\(entry.actor)</td><td>\(entry.type.replacingOccurrences(of: "_", with: " ")) \
                <span class="muted">\(subject)</span><ul>\(changes)</ul></td><td>\(entry.reason ?? "–")</td></tr>
                """
        }
        let older: HTML =
            entries.count > Self.historyPage
            ? "<p><a rel=\"next\" href=\"/dashboard/apps/\(app.app.id)/history?before=\(shown.last!.version)\">Older changes</a></p>" : ""
        let body: HTML = """
            <p class="muted">Every change to the app's catalog, newest first, \(Self.historyPage) to a page.</p>
            <div class="scroll"><table><thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th>\
            <th scope="col">Why</th></tr></thead><tbody>\(rows)</tbody></table></div>\(older)
            """
        return frame(session, title: "History · \(app.app.name)", app: app.app.id, body: body).response()
    }

    static func describe(_ value: JSONValue?) -> String {
        guard let value, !value.isNull else { return "none" }
        if let text = value.stringValue { return text }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(value) { return String(decoding: data, as: UTF8.self) }
        return "?"
    }

    static func number(_ value: Double) -> String {
        JSONNumber(value).literal
    }
}

/// `application/x-www-form-urlencoded` bodies, as browsers send forms: every name and value
/// percent-decoded (`+` is a space) to UTF-8 text without control characters (but line breaks, which a
/// textarea sends), each name at most once, at most 10,000 characters a value. Anything else is a `400`
/// naming the field.
enum Form {
    static let maximumValue = 10_000

    static func read(_ request: Request, limit: Int) async throws -> [String: String] {
        try request.requireContentType("application/x-www-form-urlencoded")
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: limit)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("a form of at most \(limit / 1024) KiB")
        }
        return try parse(Array(body.readableBytesView))
    }

    static func parse(_ bytes: [UInt8]) throws -> [String: String] {
        let fields = try RequestText.pairs(bytes, of: "form", plusIsSpace: true, lineBreaksInValues: true)
        if let (name, _) = fields.sorted(by: { $0.key < $1.key }).first(where: { TextRules.length($0.value) > maximumValue }) {
            throw ProblemDetails.badRequest("\(name): at most \(maximumValue) characters", field: name)
        }
        return fields
    }

    /// A value for a query string.
    static func escape(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(CharacterSet(charactersIn: "-._~"))) ?? ""
    }
}
