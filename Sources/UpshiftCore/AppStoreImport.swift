import Foundation

/// Reads an answer of Apple's lookup API (`https://itunes.apple.com/lookup?bundleId=…`) for
/// `upshift releases import` and the store sync (docs/CLIENTS.md, "Import from the App Store"). The lookup
/// tells only the store's current version: when it is a valid version (docs/ARCHITECTURE.md, "Versions")
/// that the catalog does not hold yet, in any status, it becomes a live release at 100 % with the store's
/// date, minimum OS and notes (in the app's default locale). Anything else adds nothing and says why.
public enum AppStoreImport {
    /// The `reason` and `actor` of the catalog event that adds an imported release.
    public static let reason = "store import"
    public static let actor = "store-sync"

    /// What one lookup answer means for an app's catalog.
    public enum Outcome: Sendable, Equatable {
        /// Add this release.
        case add(Release)
        /// The store's current version is in the catalog already.
        case present(Version)
        /// The store lists no app with this bundle id (`resultCount` 0).
        case notListed
        /// Nothing is added: the answer is malformed, names another bundle id, or its version or date
        /// is not one the catalog takes. The text says which.
        case refused(String)
    }

    /// Why an app cannot be imported on `platform` at all (nil when it can): the lookup knows only Apple's
    /// platforms, and finds an app by its bundle id.
    public static func unsupported(_ app: AppInfo, platform: Platform) -> String? {
        guard AppStoreLookup.entities.keys.contains(platform) else {
            return "the App Store lookup knows only \(AppStoreLookup.entities.keys.sorted().map(\.rawValue).joined(separator: ", ")), not \(platform)"
        }
        guard app.bundleId[platform] != nil else { return "app \(app.id) has no bundle id for \(platform)" }
        return nil
    }

    /// The lookup URL for the app's bundle id on `platform`: `base` (Apple's `…/lookup`, or a country's
    /// `…/de/lookup`) with `bundleId` and, for tvOS and macOS, `entity` appended to its query.
    public static func url(base: String, bundleId: String, platform: Platform) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        var query = "bundleId=" + (bundleId.addingPercentEncoding(withAllowedCharacters: allowed) ?? "")
        if let entity = AppStoreLookup.entities[platform] ?? nil { query += "&entity=\(entity)" }
        return base + (base.contains("?") ? "&" : "?") + query
    }

    /// What `answer` (the body of a `200`) means for `catalog` on `platform`.
    public static func outcome(of answer: [UInt8], catalog: AppCatalog, platform: Platform) -> Outcome {
        if let reason = unsupported(catalog.app, platform: platform) { return .refused(reason) }
        let bundleId = catalog.app.bundleId[platform]!
        let root: JSONValue
        do {
            root = try JSONParser.parse(answer)
        } catch {
            return .refused("the answer is not JSON: \(error)")
        }
        guard let results = root["results"]?.arrayValue else {
            return .refused("the answer has no results array")
        }
        guard let result = results.first else { return .notListed }
        guard results.count == 1 else {
            return .refused("the answer has \(results.count) results; a lookup by bundle id has one")
        }
        guard result.objectValue != nil else { return .refused("the result is not an object") }
        guard let found = result["bundleId"]?.stringValue else { return .refused("the result has no bundleId") }
        guard found == bundleId else {
            return .refused("the result is bundle id \(quoted(found)), not the app's \(quoted(bundleId))")
        }
        guard let versionText = result["version"]?.stringValue else { return .refused("the result has no version") }
        guard let version = Version(versionText) else {
            return .refused("the store's version \(quoted(versionText)) is not a valid version")
        }
        if let held = catalog.release(platform: platform, version: version) { return .present(held.version) }

        var body: [String: JSONValue] = [
            "platform": .string(platform.rawValue), "version": .string(versionText), "channel": "live", "status": "live",
            "rolloutPercent": 100,
        ]
        guard let date = result["currentVersionReleaseDate"]?.stringValue else {
            return .refused("the result has no currentVersionReleaseDate")
        }
        body["releasedAt"] = .string(date)
        switch result["minimumOsVersion"] {
        case nil, .null?: break
        case .string(let minimum)?: body["minimumOSVersion"] = .string(minimum)
        case let other?: return .refused("minimumOsVersion is \(other), not a string")
        }
        switch result["releaseNotes"] {
        case nil, .null?: break
        case .string(let text)?:
            let lines = noteLines(text)
            if !lines.isEmpty { body["notes"] = .object([catalog.app.defaultLocale: .array(lines.map(JSONValue.string))]) }
        case let other?: return .refused("releaseNotes is \(other), not a string")
        }
        // The fields as the admin API would take them: one set of rules for every way into the catalog.
        do throws(FieldError) {
            // No `rolloutSchedule` in the body: `now`, which only a schedule's start reads, is never read.
            return .add(try CatalogInput.release(.object(body), now: .distantPast))
        } catch {
            let storeNames = ["releasedAt": "currentVersionReleaseDate", "minimumOSVersion": "minimumOsVersion"]
            let field = storeNames[error.field] ?? (error.field.hasPrefix("notes") ? "releaseNotes" : error.field)
            return .refused("the store's \(field) is not one the catalog takes: \(error.message)")
        }
    }

    /// Apple's free-text release notes as the catalog's lines: one per line of text, blank lines left out,
    /// characters the catalog refuses dropped, each at most ``CatalogInput/maximumNoteLength`` scalars and
    /// at most ``CatalogInput/maximumNoteLines`` of them (a cut line or list ends in `…`).
    static func noteLines(_ text: String) -> [String] {
        var lines: [String] = []
        for raw in text.split(whereSeparator: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) {
            var line = String.UnicodeScalarView()
            for scalar in raw.unicodeScalars where TextRules.violation(in: String(scalar), lineBreaks: true) == nil {
                line.append(scalar)
            }
            var text = String(line).trimmingCharacters(in: .whitespaces)
            guard !text.isEmpty else { continue }
            if TextRules.length(text) > CatalogInput.maximumNoteLength {
                text = String(String.UnicodeScalarView(text.unicodeScalars.prefix(CatalogInput.maximumNoteLength - 1))) + "…"
            }
            lines.append(text)
        }
        if lines.count > CatalogInput.maximumNoteLines {
            lines = Array(lines.prefix(CatalogInput.maximumNoteLines - 1)) + ["…"]
        }
        return lines
    }

    private static func quoted(_ text: String) -> String {
        "\"" + String(String.UnicodeScalarView(text.unicodeScalars.prefix(100))) + "\""
    }
}
