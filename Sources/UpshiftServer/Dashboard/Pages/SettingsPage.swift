import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET` and `POST /dashboard/apps/{app}/settings`: the app's name, default locale and, per platform, its
/// store URL, store id and bundle id (an admin token's page). Saving sends what the form shows as the
/// API's merge patch (``CatalogInput/appPatch(_:to:)``) with the revision it was rendered with, so an edit
/// made meanwhile is refused, as `If-Match` is.
enum SettingsPage {
    struct Model {
        var identity: Identity
        var app: AppInfo
        /// After a save: the warnings it answered (an empty list: saved without any).
        var saved: [String]?
    }

    /// The form's fields: `name`, `defaultLocale`, `revision`, `reason`, and per row N `platform.N`,
    /// `updateURL.N`, `storeId.N`, `bundleId.N` (a blank value removes the platform's).
    struct Form {
        static let maps = ["updateURL", "storeId", "bundleId"]
        var fields: [String: String]

        func value(_ name: String) -> String? {
            fields[name].map { $0.trimmingCharacters(in: .whitespaces) }
        }

        /// The revision the form was rendered with and the required reason.
        func context() throws -> (revision: Int, reason: String) {
            guard let revision = value("revision").flatMap({ JSONNumber(literal: $0)?.integer(in: 1...Int(Int64.max)) }) else {
                throw ProblemDetails.badRequest("revision: missing; reload the page", field: "revision")
            }
            let reason = (fields["reason"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
            guard !reason.isEmpty else { throw ProblemDetails.badRequest("reason: say why (it goes into the history)", field: "reason") }
            try CatalogInput.checkText(reason, field: "reason", maximumLength: CatalogInput.maximumReasonLength, lineBreaks: true)
            return (revision, reason)
        }

        /// The merge patch the form says: every row's values, blanks as `null`.
        func patch() throws -> JSONValue {
            var body: [String: JSONValue] = [:]
            for field in ["name", "defaultLocale"] {
                guard let text = value(field) else { throw ProblemDetails.badRequest("\(field): missing; reload the page", field: field) }
                body[field] = .string(text)
            }
            var maps: [String: [String: JSONValue]] = [:]
            var row = 0
            while let name = value("platform.\(row)") {
                defer { row += 1 }
                guard !name.isEmpty else { continue }  // the blank row for a new platform
                let platform = try Platform(name, field: "platform.\(row)")
                for map in Self.maps {
                    let text = value("\(map).\(row)") ?? ""
                    maps[map, default: [:]][platform.rawValue] = text.isEmpty ? .null : .string(text)
                }
            }
            for (map, entries) in maps { body[map] = .object(entries) }
            return .object(body)
        }
    }

    static func view(_ model: Model) -> HTML {
        let app = model.app
        let platforms = Set(app.updateURL.keys).union(app.storeId.keys).union(app.bundleId.keys).sorted()
        func input(_ name: String, _ row: Int, _ value: String?, label: String) -> HTML {
            "<label>\(label)<input name=\"\(name).\(row)\" value=\"\(value ?? "")\" maxlength=\"\(CatalogInput.maximumURLLength)\"></label>"
        }
        // A row per platform, and a blank one for a new platform.
        let rows = (platforms.map(Optional.some) + [nil]).enumerated().map { row, platform -> HTML in
            let name: HTML =
                platform.map { "<input type=\"hidden\" name=\"platform.\(row)\" value=\"\($0)\"><b>\($0)</b>" }
                ?? "<label>New platform<input name=\"platform.\(row)\" value=\"\" placeholder=\"android\" maxlength=\"\(Platform.maximumLength)\"></label>"
            func value(_ map: [Platform: String]) -> String? { platform.flatMap { map[$0] } }
            return """
                <fieldset><legend>\(platform?.rawValue ?? "Add a platform")</legend>\(name)\
                \(input("updateURL", row, value(app.updateURL), label: "Store URL"))\
                \(input("storeId", row, value(app.storeId), label: "Store id"))\
                \(input("bundleId", row, value(app.bundleId), label: "Bundle id"))</fieldset>
                """
        }
        var saved: HTML = ""
        if let warnings = model.saved {
            let notices = warnings.map { warning -> HTML in "<p class=\"notice error\" role=\"alert\">Warning: \(warning)</p>" }
            saved = "<p class=\"notice ok\" role=\"status\">Saved.</p>\(notices)"
        }
        return """
            \(saved)<p class="muted">Revision \(app.revision). A blank value removes the platform's; the store id and
            bundle id are what the lookup feed answers and the store sync asks for.</p>
            <form method="post" action="/dashboard/apps/\(app.id)/settings">
            <input type="hidden" name="csrf" value="\(model.identity.session?.csrfToken ?? "")">\
            <input type="hidden" name="revision" value="\(app.revision)">
            <label>Name<input name="name" value="\(app.name)" required maxlength="\(CatalogInput.maximumNameLength)"></label>
            <label>Default locale<input name="defaultLocale" value="\(app.defaultLocale)" required maxlength="\(EventValidator.maximumLocaleLength)"></label>
            \(rows)
            <label>Reason<input name="reason" required maxlength="\(CatalogInput.maximumReasonLength)"></label>
            <button type="submit">Save the app</button></form>
            """
    }
}

extension DashboardPages {
    /// `GET /dashboard/apps/{app}/settings`
    @Sendable func settings(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        try QueryParameters(request).refuseUnknown(allowed: [])
        let app = try await context.app(in: catalog).app
        return Page.framed(identity, title: "Settings · \(app.name)", app: app.id, body: SettingsPage.view(.init(identity: identity, app: app)))
            .response()
    }

    /// `POST /dashboard/apps/{app}/settings`: saved only at the revision the form showed; the page again,
    /// with what the save answered.
    @Sendable func saveSettings(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = SettingsPage.Form(fields: try await DashboardForm.decode([String: String].self, from: request))
        let (revision, reason) = try form.context()
        let patch = try form.patch()
        _ = try CatalogInput.appPatch(patch, to: AppInfo(id: appId, name: "-"))
        let write = try await catalog.updateApp(
            appId: appId, expectedRevision: revision, actor: identity.key.actor, reason: reason, now: clock.now()
        ) { app in
            do throws(FieldError) { return try CatalogInput.appPatch(patch, to: app) } catch { throw CatalogError.invalid(error) }
        }
        await afterWrite()
        let model = SettingsPage.Model(identity: identity, app: write.value, saved: write.warnings)
        return Page.framed(identity, title: "Settings · \(write.value.name)", app: appId, body: SettingsPage.view(model)).response()
    }
}
