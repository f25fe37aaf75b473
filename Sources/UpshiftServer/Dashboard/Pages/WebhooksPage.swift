import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}/webhooks`: the app's webhook subscriptions (docs/OPERATIONS.md, "Webhooks"), an
/// admin token's page. Each shows its kinds and state, its newest deliveries with every attempt, and buttons
/// to send a test event, enable it after a day of failures, or remove it; a form makes a new one, checked as
/// the API checks it, and shows its secret this once.
enum WebhooksPage {
    static let deliveriesShown = 20

    struct Model {
        var identity: Identity
        var app: AppID
        var webhooks: [(Webhook, [WebhookDelivery])]
        /// What the last post did, said at the top of the page.
        var notice: HTML?
    }

    /// The new subscription's fields: `url`, a `kind.<kind>` box per kind, `format`, and `thresholds`
    /// (percents separated by commas or spaces).
    struct Form {
        var fields: [String: String]

        func kinds() throws -> [WebhookKind] {
            try WebhookController.kinds(.array(WebhookKind.allCases.filter { fields["kind.\($0.rawValue)"] != nil }.map { .string($0.rawValue) }))
        }

        func format() throws -> WebhookFormat {
            guard let format = WebhookFormat(rawValue: fields["format"] ?? "json") else {
                throw ProblemDetails.badRequest("format must be json or slack", field: "format")
            }
            return format
        }

        /// The thresholds as the API's array: each part a number, or a string that it refuses naming it.
        func thresholds(kinds: [WebhookKind]) throws -> [Double] {
            let text = fields["thresholds"]?.trimmingCharacters(in: .whitespaces) ?? ""
            let parts = text.split(whereSeparator: { $0 == "," || $0 == " " }).map(String.init)
            let value: JSONValue? =
                text.isEmpty
                ? nil : .array(parts.map { part in JSONNumber(literal: part).map(JSONValue.number) ?? .string(part) })
            return try WebhookController.thresholds(value, kinds: kinds)
        }
    }

    static func view(_ model: Model) -> HTML {
        let base = "/dashboard/apps/\(model.app)/webhooks"
        let csrf: HTML = "<input type=\"hidden\" name=\"csrf\" value=\"\(model.identity.session?.csrfToken ?? "")\">"
        let sections = model.webhooks.map { webhook, deliveries -> HTML in
            let id = webhook.id.uuidString.lowercased()
            let state: HTML =
                webhook.enabled
                ? (webhook.failingSince.map { "enabled; failing since \(Timestamp.format($0))" } ?? "enabled")
                : "<b class=\"bad\">disabled</b>: \(webhook.disabledReason ?? "no reason")"
            let thresholds: HTML =
                webhook.thresholds.isEmpty ? "" : " at \(webhook.thresholds.map { JSONNumber($0).literal + " %" }.joined(separator: ", "))"
            let rows = deliveries.map { delivery -> HTML in
                let attempts = delivery.attempts.map { attempt -> HTML in
                    let outcome = attempt.status.map { "status \($0)" } ?? "no answer"
                    return "<li>\(attempt.attempt): \(Timestamp.format(attempt.at)), \(attempt.durationMilliseconds) ms, \(outcome)\(attempt.error.map { ": \($0)" } ?? "")</li>"
                }
                let next: HTML = delivery.nextAt.map { "; next attempt \(Timestamp.format($0))" } ?? ""
                return """
                    <tr><td>\(Timestamp.format(delivery.createdAt))</td><td>\(delivery.kind)</td><td>\(delivery.state)\(next)</td>\
                    <td><ul>\(attempts)</ul></td></tr>
                    """
            }
            let enable: HTML =
                webhook.enabled
                ? "" : "<form method=\"post\" action=\"\(base)/\(id)/enable\">\(csrf)<button type=\"submit\">Enable it again</button></form>"
            let table: HTML =
                rows.isEmpty
                ? "<p class=\"muted\">No delivery yet.</p>"
                : """
                <div class="scroll"><table><thead><tr><th scope="col">Queued</th><th scope="col">Kind</th><th scope="col">State</th>\
                <th scope="col">Attempts</th></tr></thead><tbody>\(rows)</tbody></table></div>
                """
            return """
                <section class="webhook" id="webhook-\(id)"><h2>\(webhook.url)</h2>
                <p>\(webhook.kinds.map(\.rawValue).joined(separator: ", "))\(thresholds) · \(webhook.format.rawValue) · \(state) · \
                <span class="muted">id \(id), made \(Timestamp.format(webhook.createdAt))</span></p>
                <div class="choices"><form method="post" action="\(base)/\(id)/test">\(csrf)<button type="submit">Send a test event</button></form>\
                \(enable)<form method="post" action="\(base)/\(id)/remove">\(csrf)<button type="submit">Remove</button></form></div>
                \(table)</section>
                """
        }
        let list: HTML = sections.isEmpty ? "<p>No webhook yet.</p>" : "\(sections)"
        let boxes = WebhookKind.allCases.map { kind -> HTML in
            "<label class=\"check\"><input type=\"checkbox\" name=\"kind.\(kind.rawValue)\" value=\"on\"> \(kind.rawValue)</label>"
        }
        return """
            \(model.notice ?? "")<p class="muted">Where this app's catalog writes, its rules' actions, its adoption \
            crossings and health regressions are sent: signed JSON POSTs, tried again for a day; at most \
            \(WebhookStore.perApp) subscriptions. The newest \(deliveriesShown) deliveries of each are shown.</p>
            \(list)
            <form method="post" action="\(base)">\(csrf)<fieldset><legend>A new webhook</legend>
            <label>URL<input name="url" required maxlength="\(WebhookTarget.maximumURLBytes)" placeholder="https://hooks.example.com/upshift"></label>
            <div class="choices" aria-label="Kinds">\(boxes)</div>
            <label>Format<select name="format"><option value="json">json (signed)</option><option value="slack">slack</option></select></label>
            <label>Thresholds of adoption.crossed, in percent<input name="thresholds" placeholder="50, 90" maxlength="100"></label>
            </fieldset><button type="submit">Create the webhook</button></form>
            """
    }
}

extension DashboardPages {
    private func webhooksPage(_ identity: Identity, _ app: AppID, notice: HTML? = nil) async throws -> Response {
        var webhooks: [(Webhook, [WebhookDelivery])] = []
        for webhook in try await self.webhookStore.list(app: app) {
            webhooks.append((webhook, try await self.webhookStore.deliveries(app: app, webhook: webhook.id, limit: WebhooksPage.deliveriesShown)))
        }
        let model = WebhooksPage.Model(identity: identity, app: app, webhooks: webhooks, notice: notice)
        return Page.framed(identity, title: "Webhooks · \(app)", app: app, body: WebhooksPage.view(model)).response()
    }

    /// `GET /dashboard/apps/{app}/webhooks[?done=]`: `done` says what the last button did.
    @Sendable func webhooks(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let query = try QueryParameters(request)
        try query.refuseUnknown(allowed: ["done"])
        let app = try context.knownApp(in: snapshot)
        let done: HTML? =
            switch query["done"] {
            case "test": "<p class=\"notice ok\" role=\"status\">A test event is queued: its delivery is listed below.</p>"
            case "enable": "<p class=\"notice ok\" role=\"status\">Enabled: its pending deliveries go on.</p>"
            case "remove": "<p class=\"notice ok\" role=\"status\">Removed, with its deliveries.</p>"
            default: nil
            }
        return try await webhooksPage(identity, app, notice: done)
    }

    /// `POST /dashboard/apps/{app}/webhooks`: the page again, with the new subscription's secret shown this once.
    @Sendable func createWebhook(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try context.knownApp(in: snapshot)
        let form = WebhooksPage.Form(fields: try await DashboardForm.decode([String: String].self, from: request))
        let url = (form.fields["url"] ?? "").trimmingCharacters(in: .whitespaces)
        let kinds = try form.kinds()
        let (webhook, secret) = try await WebhookController.subscribe(
            app, url: url, kinds: kinds, format: try form.format(), thresholds: try form.thresholds(kinds: kinds), store: webhookStore,
            settings: webhookSettings, now: clock.now())
        let notice: HTML = """
            <p class="notice ok" role="status">Created \(webhook.url). Its secret, shown this once (every delivery is \
            signed with it): <code id="secret">\(secret)</code></p>
            """
        return try await webhooksPage(identity, app, notice: notice)
    }

    /// `POST /dashboard/apps/{app}/webhooks/{webhook}/{test|enable|remove}`: done, then the page again.
    @Sendable func changeWebhook(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        _ = try context.requireIdentity()
        let app = try context.knownApp(in: snapshot)
        let text = try context.pathValue("webhook")
        guard let id = UUID(uuidString: text) else { throw ProblemDetails.badRequest("webhook must be a webhook id", field: "webhook") }
        let action = try context.pathValue("action")
        do {
            switch action {
            case "test": _ = try await webhookStore.test(app: app, id: id, now: clock.now())
            case "enable": _ = try await webhookStore.enable(app: app, id: id)
            case "remove": guard try await webhookStore.delete(app: app, id: id) else { throw WebhookStore.Failure.notFound }
            default: throw ProblemDetails.notFound("no such action: test, enable or remove")
            }
        } catch WebhookStore.Failure.notFound {
            throw ProblemDetails.notFound("no webhook \(id.uuidString.lowercased()) of app \(app)")
        }
        return Self.redirect("/dashboard/apps/\(app)/webhooks?done=\(action)")
    }
}
