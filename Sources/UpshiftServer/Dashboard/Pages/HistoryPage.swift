import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// `GET /dashboard/apps/{app}/history`: every change to the app's catalog, newest first, 50 to a page;
/// `before` (a stream version) pages back to the app's creation.
enum HistoryPage {
    static let pageSize = 50

    struct Model {
        var app: AppCatalog
        var entries: [CatalogHistoryEntry]
        /// `before` of the next (older) page, when there is one.
        var older: Int?
    }

    static func model(_ request: Request, app: AppCatalog, catalog: CatalogStore) async throws -> Model {
        let query = try QueryParameters(request)
        let before = try query["before"].map { _ in try query.integer("before", default: 0, range: 1...Int(Int32.max)) }
        // One more than shown tells whether an older page exists.
        let entries = try await catalog.history(appId: app.app.id, before: before, limit: pageSize + 1)
        let shown = Array(entries.prefix(pageSize))
        return Model(app: app, entries: shown, older: entries.count > pageSize ? shown.last?.version : nil)
    }

    static func view(_ model: Model) -> HTML {
        let rows = model.entries.map { entry -> HTML in
            let subject = [entry.platform?.rawValue, entry.releaseVersion].compactMap { $0 }.joined(separator: " ")
            let changes = entry.changes.sorted { $0.key < $1.key }.map { field, change -> HTML in
                "<li><b>\(field)</b>: \(describe(change.from)) → \(describe(change.to))</li>"
            } + (entry.schedule.map { [describe($0)] } ?? [])
                + (entry.undecodable.map { ["<li><b>undecodable</b>: \($0) (stream version \(entry.version))</li>"] } ?? [])
            return """
                <tr><td>\(Timestamp.format(entry.at))</td><td>\(entry.actor)</td><td>\(entry.type.replacingOccurrences(of: "_", with: " ")) \
                <span class="muted">\(subject)</span><ul>\(changes)</ul></td><td>\(entry.reason ?? "–")</td></tr>
                """
        }
        let older: HTML =
            model.older.map { "<p><a rel=\"next\" href=\"/dashboard/apps/\(model.app.app.id)/history?before=\($0)\">Older changes</a></p>" }
            ?? ""
        return """
            <p class="muted">Every change to the app's catalog, newest first, \(pageSize) to a page.</p>
            <div class="scroll"><table><thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">What</th>\
            <th scope="col">Why</th></tr></thead><tbody>\(rows)</tbody></table></div>\(older)
            """
    }

    /// What a write of the rollout worker did, beside its changes: the step, those skipped after a
    /// downtime, and a pause that ended by itself.
    static func describe(_ note: CatalogEvent.ScheduleNote) -> HTML {
        var parts: [String] = []
        if let step = note.step {
            parts.append("step \(step) of the schedule" + (note.percent.map { " (\(JSONNumber($0).literal) %)" } ?? ""))
        }
        if !note.skipped.isEmpty {
            parts.append("skipped step\(note.skipped.count == 1 ? "" : "s") \(note.skipped.map(String.init).joined(separator: ", ")), due while no worker ran")
        }
        if note.resumed { parts.append("the pause reached its 30 days and ended by itself") }
        if let held = note.held { parts.append("the step due is held by a rule: \(held)") }
        if note.released == true { parts.append("the rule's hold ended: the signals are within its thresholds") }
        if let at = note.reanchoredAt {
            parts.append("follows the release date: starts at \(Timestamp.format(at)), time held and pauses carried over")
        }
        return "<li><b>schedule</b>: \(parts.joined(separator: "; "))</li>"
    }

    static func describe(_ value: JSONValue?) -> String {
        guard let value, !value.isNull else { return "none" }
        if let text = value.stringValue { return text }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        if let data = try? encoder.encode(value) { return String(decoding: data, as: UTF8.self) }
        return "?"
    }
}

extension DashboardPages {
    @Sendable func history(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let model = try await HistoryPage.model(request, app: app, catalog: catalog)
        return Page.framed(identity, title: "History · \(app.app.name)", app: app.app.id, body: HistoryPage.view(model)).response()
    }
}
