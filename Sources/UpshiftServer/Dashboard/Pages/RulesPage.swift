import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}/rules`: the app's rules (docs/OPERATIONS.md, "Rules"), each with what its
/// evaluation recorded (the dry runs, the actions, the skips). An admin token also edits: each rule's form,
/// and one for a new rule, send a definition as the API takes it, previewed first (what the rule would do
/// now, per release, recording nothing) and saved at the revision the form showed.
enum RulesPage {
    static let recordsShown = 10

    struct Model {
        var identity: Identity
        var app: AppCatalog
        var records: [String: [RuleRecord]]
        /// A previewed form: its fields, and what the rule would do now.
        var draft: Draft?
        var saved = false
    }

    struct Draft {
        var form: Form
        var preview: [RuleRecord]
    }

    /// The form's fields: those of every catalog form (`platform`, `revision`, 0 for a new rule, and
    /// `reason`), and `id`, `definition` (the rule's JSON) and `state`.
    struct Form: CatalogWriteForm {
        var platform: String?
        var id: String
        var definition: String
        var state: String
        var revision: String?
        var reason: String?

        /// The rule the form says, and where it goes; a failure names its field.
        func rule(now: Date) throws -> Rule {
            let platform = try Platform.required(platform)
            let id = id.trimmingCharacters(in: .whitespaces)
            guard RuleDefinition.isID(id) else {
                throw ProblemDetails.badRequest("id: '\(id)' is not a rule id (^[a-z0-9][a-z0-9-]{0,62}$)", field: "id")
            }
            guard var object = (try? JSONValue.parse(Data(definition.utf8)))?.objectValue else {
                throw ProblemDetails.badRequest("definition: must be a JSON object such as {\"kind\": \"advance\"}", field: "definition")
            }
            object["state"] = .string(state)
            return Rule(id: id, platform: platform, definition: try RuleDefinition(json: .object(object)), writtenAt: now)
        }
    }

    static func definitionText(_ definition: RuleDefinition) -> String {
        var object = definition.json
        object["state"] = nil
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(JSONValue.object(object))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    static func view(_ model: Model) -> HTML {
        let app = model.app.app.id
        let rules = model.app.rules.keys.sorted().flatMap(model.app.rules(for:))
        func records(_ list: [RuleRecord], none: String = "Nothing recorded yet.") -> HTML {
            guard !list.isEmpty else { return "<p class=\"muted\">\(none)</p>" }
            let rows = list.map { record -> HTML in
                let subject = [record.version, record.action].compactMap { $0 }.joined(separator: " ")
                return "<tr><td>\(Timestamp.format(record.at))</td><td>\(record.outcome.rawValue.replacingOccurrences(of: "_", with: " "))</td><td>\(subject.isEmpty ? "–" : subject)</td><td>\(record.summary)</td></tr>"
            }
            return """
                <div class="scroll"><table><thead><tr><th scope="col">When</th><th scope="col">Outcome</th>\
                <th scope="col">Release</th><th scope="col">Figures</th></tr></thead><tbody>\(rows.joined())</tbody></table></div>
                """
        }
        func form(_ fields: Form, legend: String, new: Bool) -> HTML {
            guard model.identity.mayWrite else { return "" }
            let states = RuleDefinition.State.allCases.map { state -> HTML in
                "<option value=\"\(state.rawValue)\"\(state.rawValue == fields.state ? " selected" : "")>\(state.rawValue)</option>"
            }
            let target: HTML =
                new
                ? """
                <label>Platform<input name="platform" value="\(fields.platform ?? "")" required maxlength="\(Platform.maximumLength)"></label>\
                <label>Id<input name="id" value="\(fields.id)" required maxlength="63" placeholder="crash-guard"></label>
                """
                : "<input type=\"hidden\" name=\"platform\" value=\"\(fields.platform ?? "")\"><input type=\"hidden\" name=\"id\" value=\"\(fields.id)\">"
            return """
                <form method="post" action="/dashboard/apps/\(app)/rules"><fieldset><legend>\(legend)</legend>
                <input type="hidden" name="csrf" value="\(model.identity.session?.csrfToken ?? "")">\
                <input type="hidden" name="revision" value="\(fields.revision ?? "0")">\(target)
                <label>Definition<textarea name="definition" rows="3" cols="80" required>\(fields.definition)</textarea></label>
                <label>State<select name="state">\(states.joined())</select></label>
                <label>Reason<input name="reason" value="\(fields.reason ?? "")" maxlength="\(CatalogInput.maximumReasonLength)"></label>
                <button type="submit" formaction="/dashboard/apps/\(app)/rules/preview">Preview what it would do now</button>
                <button type="submit">Save the rule</button></fieldset></form>
                """
        }
        var preview: HTML = ""
        if let draft = model.draft {
            preview = """
                <section id="preview"><h2>What \(draft.form.id) would do now</h2>
                <p class="muted">Per release it watches, with the figures it sees; nothing was recorded or changed.</p>\
                \(records(draft.preview, none: "It watches no release now (live, offered, released in the last 35 days)."))</section>
                """
        }
        let sections = rules.map { rule -> HTML in
            let key = "\(rule.platform)/\(rule.id)"
            let fields = Form(
                platform: rule.platform.rawValue, id: rule.id, definition: definitionText(rule.definition),
                state: rule.definition.state.rawValue, revision: String(rule.revision), reason: nil)
            return """
                <section class="rule"><h2>\(rule.id) <span class="muted">\(rule.platform.rawValue) · \(rule.definition.kind.name) · \
                \(rule.definition.state.rawValue) · revision \(rule.revision)</span></h2>
                <p><code>\(definitionText(rule.definition))</code></p>\(records(model.records[key] ?? []))\
                \(form(fields, legend: "Change \(rule.id)", new: false))</section>
                """
        }
        let blank = model.draft.map { $0.form.revision == "0" ? $0.form : nil } ?? nil
        let newForm = form(
            blank ?? Form(platform: "ios", id: "", definition: #"{"kind": "halt_on_health", "mode": "guarded"}"#, state: "dry-run", revision: "0"),
            legend: "A new rule", new: true)
        let saved: HTML = model.saved ? "<p class=\"notice ok\" role=\"status\">Saved.</p>" : ""
        return """
            \(saved)\(preview)
            <p class="muted">Rules halt a release that does worse than the one before it, and raise the minimum once
            adoption allows; a dry run records what it would do. Each records once per change, newest first (the last
            \(recordsShown) here). Kinds, their fields and the trust model: docs/OPERATIONS.md, "Rules".</p>
            \(rules.isEmpty ? "<p>No rules yet.</p>" : sections.joined())\(newForm)
            """
    }
}

extension DashboardPages {
    /// `GET /dashboard/apps/{app}/rules`
    @Sendable func rules(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["saved"])
        return try await rulesPage(identity, app: try await context.app(in: catalog), saved: query["saved"] != nil)
    }

    private func rulesPage(_ identity: Identity, app: AppCatalog, draft: RulesPage.Draft? = nil, saved: Bool = false) async throws
        -> Response
    {
        var records: [String: [RuleRecord]] = [:]
        for rule in app.rules.values.joined() {
            records["\(rule.platform)/\(rule.id)"] = try await ruleRecords.records(
                appId: app.app.id, platform: rule.platform, ruleId: rule.id, limit: RulesPage.recordsShown)
        }
        let model = RulesPage.Model(identity: identity, app: app, records: records, draft: draft, saved: saved)
        return Page.framed(identity, title: "Rules · \(app.app.name)", app: app.app.id, body: RulesPage.view(model)).response()
    }

    /// `POST /dashboard/apps/{app}/rules/preview`: the form's rule evaluated now, recording and changing
    /// nothing; the page again with what it would do and the form as sent.
    @Sendable func previewRule(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let form = try await DashboardForm.decode(RulesPage.Form.self, from: request)
        let preview = try await ruleEvaluator.preview(try form.rule(now: clock.now()), app: app)
        return try await rulesPage(identity, app: app, draft: RulesPage.Draft(form: form, preview: preview))
    }

    /// `POST /dashboard/apps/{app}/rules`: saved at the revision the form showed (0: a new rule).
    @Sendable func saveRule(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = try await DashboardForm.decode(RulesPage.Form.self, from: request)
        let rule = try form.rule(now: clock.now())
        let (_, revision, reason) = try form.writeContext()
        _ = try await catalog.replaceRule(
            appId: appId, platform: rule.platform, id: rule.id, rule.definition, expectedRevision: revision,
            actor: identity.key.actor, reason: reason, now: clock.now())
        await afterWrite()
        return Self.redirect("/dashboard/apps/\(appId)/rules?saved=1")
    }
}
