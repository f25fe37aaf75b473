import Foundation

/// The bodies of an app: `POST /v1/apps` and `PATCH /v1/apps/{app}`.
extension CatalogInput {
    /// `{id, name, defaultLocale, updateURL: {platform: url}, storeId: {platform: id}, bundleId: {platform: id}}`.
    public static func app(_ body: JSONValue) throws(FieldError) -> AppInfo {
        let fields = try Fields(
            body, allowed: ["id", "name", "defaultLocale", "updateURL", "storeId", "bundleId", "reason"])
        let id = try AppID(fields.string("id", required: true)!)
        let name = try fields.string("name", required: true, maximumLength: maximumNameLength)!
        let locale = try fields.locale("defaultLocale") ?? "en"
        let urls = try fields.platformMap("updateURL", validate: checkPageURL)
        let stores = try fields.platformMap("storeId", validate: checkStoreText)
        let bundles = try fields.platformMap("bundleId", validate: checkStoreText)
        return AppInfo(id: id, name: name, defaultLocale: locale, updateURL: urls, storeId: stores, bundleId: bundles)
    }

    /// The fields `PATCH /v1/apps/{app}` takes.
    static let appPatchFields: Set = ["id", "name", "defaultLocale", "updateURL", "storeId", "bundleId", "reason"]

    /// A JSON merge patch (RFC 7396) of `app`: `name` and `defaultLocale` replace theirs (`null` cannot
    /// remove them); `updateURL`, `storeId` and `bundleId` merge per platform, a platform set to `null`
    /// removed and the whole map `null` removing every platform; each value is validated as on creation.
    /// `id` is immutable (refused, as the path names the app). Unknown fields are refused, all named.
    public static func appPatch(_ body: JSONValue, to app: AppInfo) throws(FieldError) -> AppInfo {
        guard let object = body.objectValue else { throw FieldError("body", "must be a JSON object") }
        let unknown = object.keys.filter { !appPatchFields.contains($0) }.sorted()
        if let first = unknown.first {
            throw FieldError(first, unknown.count == 1 ? "unknown field" : "unknown fields: \(unknown.joined(separator: ", "))")
        }
        let fields = try Fields(body, allowed: appPatchFields)
        var app = app
        if object["id"] != nil { throw FieldError("id", "is immutable: the path names the app") }
        for key in ["name", "defaultLocale"] where object[key]?.isNull == true {
            throw FieldError(key, "cannot be removed")
        }
        if let name = try fields.string("name", required: false, maximumLength: maximumNameLength) { app.name = name }
        if let locale = try fields.locale("defaultLocale") { app.defaultLocale = locale }
        app.updateURL = try merged(object["updateURL"], "updateURL", into: app.updateURL, validate: checkPageURL)
        app.storeId = try merged(object["storeId"], "storeId", into: app.storeId, validate: checkStoreText)
        app.bundleId = try merged(object["bundleId"], "bundleId", into: app.bundleId, validate: checkStoreText)
        return app
    }

    /// RFC 7396 for a map of platform → text: absent keeps `map`, `null` empties it, an object merges.
    static func merged(
        _ patch: JSONValue?, _ key: String, into map: [Platform: String], validate: (String, String) throws(FieldError) -> Void
    ) throws(FieldError) -> [Platform: String] {
        guard let patch else { return map }
        if patch.isNull { return [:] }
        guard let object = patch.objectValue else { throw FieldError(key, "must be an object of platform → value or null") }
        var map = map
        for (name, entry) in object.sorted(by: { $0.key < $1.key }) {
            let field = "\(key).\(name)"
            let platform = try Platform(name, field: field)
            if entry.isNull {
                map[platform] = nil
                continue
            }
            guard let text = entry.stringValue else { throw FieldError(field, "must be a string or null") }
            try validate(field, text)
            map[platform] = text
        }
        return map
    }

    static func checkPageURL(_ field: String, _ text: String) throws(FieldError) {
        guard isURL(text) else { throw FieldError(field, urlRule) }
    }

    static func checkStoreText(_ field: String, _ text: String) throws(FieldError) {
        try checkText(text, field: field, maximumLength: maximumStoreIdLength, lineBreaks: false)
    }
}
