import Foundation

/// Validates admin request bodies (apps, releases, release edits, policies) into catalog values.
/// Unknown fields are errors: a misspelt `minimumVerison` must not be silently ignored.
public enum CatalogInput {
    /// Limits on free text, so that one catalog entry cannot bloat every check response. Lengths count
    /// Unicode scalars (``TextRules``).
    public static let maximumNoteLines = 50
    public static let maximumNoteLength = 1_000
    public static let maximumNameLength = 200
    public static let maximumURLLength = 2_000
    public static let maximumReasonLength = 1_000
    /// Decimal fields take exactly the decimals they can act on, never a value rounded to one: a rollout
    /// in hundredths of a percent (one of the 10,000 buckets), days in thousandths (86.4 s).
    public static let rolloutPercentPlaces = 2
    public static let dayPlaces = 3

    /// `{id, name, defaultLocale, updateURL: {platform: url}, storeId: {platform: id}, bundleId: {platform: id}}`.
    public static func app(_ body: JSONValue) throws(FieldError) -> AppInfo {
        let fields = try Fields(
            body, allowed: ["id", "name", "defaultLocale", "updateURL", "storeId", "bundleId", "reason"])
        let id = try fields.string("id", required: true)!
        guard AppID.isValid(id) else { throw FieldError("id", "must match ^[a-z0-9][a-z0-9-]{0,62}$") }
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
        _ patch: JSONValue?, _ key: String, into map: [String: String], validate: (String, String) throws(FieldError) -> Void
    ) throws(FieldError) -> [String: String] {
        guard let patch else { return map }
        if patch.isNull { return [:] }
        guard let object = patch.objectValue else { throw FieldError(key, "must be an object of platform → value or null") }
        var map = map
        for (platform, entry) in object.sorted(by: { $0.key < $1.key }) {
            let field = "\(key).\(platform)"
            guard EventValidator.isPlatform(platform) else { throw FieldError(field, "not a platform name") }
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

    /// A new release: every field of DESIGN.md section 4 and its `platform`, and optionally its
    /// `rolloutSchedule`, which starts at the later of `releasedAt` and `now`.
    public static func release(_ body: JSONValue, now: Date) throws(FieldError) -> Release {
        let fields = try Fields(body, allowed: releaseFields.union(["platform", "version", "reason", "rolloutSchedule"]))
        let platform = try fields.string("platform", required: true)!
        guard EventValidator.isPlatform(platform) else {
            throw FieldError("platform", "lowercase letters, digits, _ or -, at most 32")
        }
        let version = try fields.version("version", required: true)!
        guard let releasedAt = try fields.date("releasedAt") else { throw FieldError("releasedAt", "is required") }
        var release = Release(platform: platform, version: version, releasedAt: releasedAt)
        try apply(fields, to: &release)
        try ScheduleEdit(fields)?.apply(fields, to: &release, previous: nil, now: now)
        return release
    }

    /// A partial edit of a release (status, rollout, schedule, notes, dates …) made at `now`; `platform`
    /// and `version` are the path's.
    public static func releasePatch(_ body: JSONValue, to release: Release, now: Date) throws(FieldError) -> Release {
        let fields = try Fields(body, allowed: releaseFields.union(["reason", "rolloutSchedule", "rolloutAction"]))
        // The rollout's fields are read before any rule that weighs them against each other or against the
        // stored release: a value of the wrong shape is a 400 whatever else the edit says or the revision is.
        var action: RolloutAction?
        if let name = try fields.string("rolloutAction", required: false) {
            guard let named = RolloutAction(rawValue: name) else {
                throw FieldError("rolloutAction", "must be pause, resume, halt or release")
            }
            action = named
        }
        let scheduleEdit = try ScheduleEdit(fields)
        var edited = release
        if let releasedAt = try fields.date("releasedAt") { edited.releasedAt = releasedAt }
        try apply(fields, to: &edited)
        try edited.reconcileSchedule(with: release, now: now)
        // A schedule the same edit ends or replaces does not follow the old one's date.
        if scheduleEdit == nil { try edited.followReleaseDate(from: release, now: now) }
        if let action {
            let others = ["rolloutPercent", "rolloutPaused"].filter { fields.object[$0].map { !$0.isNull } == true }
            guard others.isEmpty, !fields.has("rolloutSchedule") else {
                throw FieldError(
                    "rolloutAction", "is the whole change of the rollout: send it without rolloutPercent, rolloutPaused and rolloutSchedule",
                    kind: .inconsistent)
            }
            try edited.perform(action, now: now)
        }
        try scheduleEdit?.apply(fields, to: &edited, previous: release, now: now)
        return edited
    }

    /// A proposed change of one platform's catalog, for the policy backtest, in the admin API's shapes:
    /// `policy` a whole policy as `PUT` takes it, `releases` an edit per existing release (version → the
    /// body `PATCH` takes), `newReleases` releases not in the catalog yet (bodies `POST` takes). Errors name the member: `policy.minimumVersion`, `releases.2.0.rolloutPercent`.
    public static func proposal(_ body: JSONValue, to catalog: AppCatalog, platform: String, now: Date) throws(FieldError)
        -> AppCatalog
    {
        let fields = try Fields(body, allowed: ["policy", "releases", "newReleases"])
        var proposed = catalog
        for (index, release) in try newReleases(body, platform: platform, now: now).enumerated() {
            guard proposed.release(platform: platform, version: release.version) == nil else {
                throw FieldError("newReleases[\(index)].version", "\(release.version.text) exists on \(platform)", kind: .inconsistent)
            }
            proposed.upsert(release)
        }
        if let value = fields.object["policy"], !value.isNull {
            do throws(FieldError) {
                var policy = try CatalogInput.policy(value)
                _ = try reason(value)
                try checkMinimumBelowTarget(policy)
                policy.revision = catalog.policy(for: platform).revision
                proposed.policies[platform] = policy
            } catch {
                throw error.inside("policy")
            }
        }
        if let value = fields.object["releases"], !value.isNull {
            guard let edits = value.objectValue else { throw FieldError("releases", "must be an object of version → edit") }
            guard edits.count <= 1_000 else { throw FieldError("releases", "at most 1000 releases") }
            for (text, edit) in edits.sorted(by: { $0.key < $1.key }) {
                let name = "releases.\(text)"
                guard let version = Version(text) else { throw FieldError(name, "not a valid version") }
                guard let release = catalog.release(platform: platform, version: version) else {
                    throw FieldError(name, "no release \(text) on \(platform)", kind: .inconsistent)
                }
                do throws(FieldError) {
                    proposed.upsert(try releasePatch(edit, to: release, now: now))
                    _ = try reason(edit)
                } catch {
                    throw error.inside(name)
                }
            }
        }
        return proposed
    }

    /// At most this many new releases in one backtest.
    public static let maximumNewReleases = 10

    /// The backtest's `newReleases`: bodies of `POST …/releases`, validated as such (errors name
    /// `newReleases[i].field`), each on the backtest's `platform` (`422` otherwise).
    public static func newReleases(_ body: JSONValue, platform: String, now: Date) throws(FieldError) -> [Release] {
        guard let value = body["newReleases"], !value.isNull else { return [] }
        guard case .array(let items) = value else { throw FieldError("newReleases", "must be an array of releases") }
        guard items.count <= maximumNewReleases else { throw FieldError("newReleases", "at most \(maximumNewReleases) releases") }
        var releases: [Release] = []
        for (index, item) in items.enumerated() {
            let name = "newReleases[\(index)]"
            do throws(FieldError) {
                let created = try release(item, now: now)
                _ = try reason(item)
                guard created.platform == platform else {
                    throw FieldError("platform", "the backtest is of \(platform): \(created.platform) is another", kind: .inconsistent)
                }
                releases.append(created)
            } catch {
                throw error.inside(name)
            }
        }
        return releases
    }

    /// The fields of a release edit, checked alone (on a release not yet out, at 0 %): what depends on the
    /// stored rollout (a pause needs a running schedule …) is judged when the edit meets it.
    public static func checkReleasePatch(_ body: JSONValue, platform: String, version: Version, now: Date) throws(FieldError) {
        do {
            _ = try releasePatch(
                body, to: Release(platform: platform, version: version, releasedAt: .distantFuture, rolloutPercent: 0), now: now)
        } catch where error.kind == .inconsistent && ["rolloutSchedule", "rolloutAction"].contains(error.field) {}
    }

    /// `rolloutSchedule`: `"appStore"` or a list of steps starts a schedule, `null` ends one. Read (its shape
    /// checked) before the rest of an edit, applied after it.
    private enum ScheduleEdit {
        case end
        case start(RolloutSchedule.Kind, [RolloutSchedule.Step])

        /// nil when the edit does not name `rolloutSchedule`.
        init?(_ fields: Fields) throws(FieldError) {
            guard let value = fields.object["rolloutSchedule"] else { return nil }
            if value.isNull {
                self = .end
            } else {
                let (kind, steps) = try RolloutSchedule.parse(value)
                self = .start(kind, steps)
            }
        }

        func apply(_ fields: Fields, to release: inout Release, previous: Release?, now: Date) throws(FieldError) {
            switch self {
            case .end:
                release.rolloutSchedule = nil
            case .start(let kind, let steps):
                if fields.object["rolloutPercent"].map({ !$0.isNull }) == true {
                    throw FieldError(
                        "rolloutPercent", "the schedule sets the rollout: send rolloutPercent or rolloutSchedule, not both",
                        kind: .inconsistent)
                }
                try release.startSchedule(kind, steps, now: now, previous: previous)
            }
        }
    }

    /// A minimum above the target would block installs from the versions the policy offers.
    public static func checkMinimumBelowTarget(_ policy: Policy) throws(FieldError) {
        if let minimum = policy.minimumVersion, let target = policy.targetVersion, minimum > target {
            throw FieldError("minimumVersion", "is above targetVersion \(target)", kind: .inconsistent)
        }
    }

    /// A whole policy (`PUT` replaces it): `enabled` is required, every other field optional.
    public static func policy(_ body: JSONValue) throws(FieldError) -> Policy {
        let fields = try Fields(
            body,
            allowed: [
                "enabled", "minimumVersion", "targetVersion", "blockedVersions", "notifyAfterDays", "blockAfterDays",
                "versionsBehindThreshold", "remindIntervalSeconds", "checkIntervalSeconds", "allowSkip", "reason",
                "revision",  // a policy as read may be sent back; the revision that counts is If-Match
            ])
        guard let enabled = try fields.bool("enabled") else { throw FieldError("enabled", "is required") }
        var policy = Policy(enabled: enabled)
        policy.minimumVersion = try fields.version("minimumVersion", required: false)
        policy.targetVersion = try fields.version("targetVersion", required: false)
        try checkMinimumBelowTarget(policy)
        if let blocked = try fields.array("blockedVersions") {
            guard blocked.count <= 1_000 else { throw FieldError("blockedVersions", "at most 1000 versions") }
            policy.blockedVersions = try blocked.enumerated().map { (index, value) throws(FieldError) in
                guard let text = value.stringValue, let version = Version(text) else {
                    throw FieldError("blockedVersions[\(index)]", "not a valid version")
                }
                return version
            }
        }
        policy.notifyAfterDays = try fields.decimal("notifyAfterDays", in: 0...3_650, places: dayPlaces)
        policy.blockAfterDays = try fields.decimal("blockAfterDays", in: 0...3_650, places: dayPlaces)
        policy.versionsBehindThreshold =
            try fields.integer("versionsBehindThreshold", in: 1...1_000) ?? Policy.defaultVersionsBehindThreshold
        policy.remindIntervalSeconds =
            try fields.integer("remindIntervalSeconds", in: 0...31_536_000) ?? Policy.defaultRemindIntervalSeconds
        policy.checkIntervalSeconds =
            try fields.integer("checkIntervalSeconds", in: 0...31_536_000) ?? Policy.defaultCheckIntervalSeconds
        policy.allowSkip = try fields.bool("allowSkip") ?? true
        return policy
    }

    /// The optional `reason` of any write (line breaks allowed).
    public static func reason(_ body: JSONValue) throws(FieldError) -> String? {
        guard let value = body["reason"], !value.isNull else { return nil }
        guard let text = value.stringValue else { throw FieldError("reason", "must be a string") }
        try checkText(text, field: "reason", maximumLength: maximumReasonLength, lineBreaks: true, allowEmpty: true)
        return text
    }

    /// Free text: no control characters (line breaks only where allowed), at most `maximumLength` scalars.
    public static func checkText(
        _ text: String, field: String, maximumLength: Int, lineBreaks: Bool, allowEmpty: Bool = false
    ) throws(FieldError) {
        guard allowEmpty || !text.isEmpty else { throw FieldError(field, "must not be empty") }
        guard TextRules.length(text) <= maximumLength else {
            throw FieldError(field, "at most \(maximumLength) characters (Unicode scalars)")
        }
        if let violation = TextRules.violation(in: text, lineBreaks: lineBreaks) { throw FieldError(field, violation) }
    }

    static let releaseFields: Set<String> = [
        "build", "releasedAt", "channel", "minimumOSVersion", "maximumOSVersion", "notes", "updateURL", "status",
        "rolloutPercent", "rolloutPaused", "downloadURL", "downloadLength", "edSignature", "priority",
    ]

    private static func apply(_ fields: Fields, to release: inout Release) throws(FieldError) {
        if fields.has("build") { release.build = try fields.integer("build", in: 0...EventValidator.maximumBuild) }
        if let channel = try fields.string("channel", required: false) {
            guard let value = Channel(rawValue: channel) else { throw FieldError("channel", "must be live or beta") }
            release.channel = value
        }
        if fields.has("minimumOSVersion") { release.minimumOSVersion = try fields.version("minimumOSVersion", required: false) }
        if fields.has("maximumOSVersion") { release.maximumOSVersion = try fields.version("maximumOSVersion", required: false) }
        if let minimum = release.minimumOSVersion, let maximum = release.maximumOSVersion, minimum > maximum {
            throw FieldError("minimumOSVersion", "is above maximumOSVersion \(maximum)", kind: .inconsistent)
        }
        if let notes = try fields.notes("notes") { release.notes = notes }
        if fields.has("updateURL") {
            release.updateURL = try fields.string("updateURL", required: false, maximumLength: maximumURLLength)
            if let url = release.updateURL, !isURL(url) { throw FieldError("updateURL", urlRule) }
        }
        if fields.has("downloadURL") {
            release.downloadURL = try fields.string("downloadURL", required: false, maximumLength: maximumURLLength)
            if let url = release.downloadURL, !isDownloadURL(url) { throw FieldError("downloadURL", downloadURLRule) }
        }
        if fields.has("downloadLength") {
            release.downloadLength = try fields.integer("downloadLength", in: 0...maximumDownloadLength)
        }
        if fields.has("edSignature") {
            release.edSignature = try fields.string("edSignature", required: false, maximumLength: 88)
            if let signature = release.edSignature, !isEdSignature(signature) {
                throw FieldError("edSignature", "must be the standard base64 (with padding) of a 64-byte EdDSA signature")
            }
        }
        if let status = try fields.string("status", required: false) {
            guard let value = ReleaseStatus(rawValue: status) else {
                throw FieldError("status", "must be live or withdrawn")
            }
            release.status = value
        }
        if let percent = try fields.decimal("rolloutPercent", in: 0...100, places: rolloutPercentPlaces) {
            release.rolloutPercent = percent
        }
        if let paused = try fields.bool("rolloutPaused") { release.rolloutPaused = paused }
        if fields.has("priority") { release.priority = try fields.integer("priority", in: 0...5) }
    }

    static let maximumStoreIdLength = 200
    /// 1 TiB: larger than any app, small enough for every client's integer.
    public static let maximumDownloadLength = 1 << 40
    static let downloadURLRule = "must be an absolute http(s) URL with a host, in printable ASCII"

    /// An absolute http(s) URL (``isURL`` without the store schemes): Sparkle downloads it.
    public static func isDownloadURL(_ text: String) -> Bool {
        (text.hasPrefix("https://") || text.hasPrefix("http://")) && isURL(text)
    }

    /// Strict base64 (standard alphabet, padded, nothing else) of exactly 64 bytes: decoding and encoding
    /// again gives the same text, so no other spelling of those bytes passes.
    public static func isEdSignature(_ text: String) -> Bool {
        guard text.utf8.count == 88, let bytes = Data(base64Encoded: text), bytes.count == 64 else { return false }
        return bytes.base64EncodedString() == text
    }
    static let urlRule = "must be an http(s) URL with a host, or an itms-apps: or market: URL, in printable ASCII"

    /// `^(https?://[A-Za-z0-9.-]+(:[0-9]{1,5})?([/?#][!-~]*)?|(itms-apps|market):[!-~]+)$`, at most
    /// 2,000 characters: the URL is handed to apps as it is, so only its shape is checked, exactly as
    /// docs/openapi.yaml states it.
    public static func isURL(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard bytes.count <= maximumURLLength else { return false }
        func printable(_ slice: ArraySlice<UInt8>) -> Bool { slice.allSatisfy { $0 >= 0x21 && $0 <= 0x7E } }
        for scheme in ["itms-apps:", "market:"] where bytes.starts(with: scheme.utf8) {
            let rest = bytes.dropFirst(scheme.utf8.count)
            return !rest.isEmpty && printable(rest)
        }
        var rest: ArraySlice<UInt8>
        if bytes.starts(with: "https://".utf8) {
            rest = bytes.dropFirst(8)
        } else if bytes.starts(with: "http://".utf8) {
            rest = bytes.dropFirst(7)
        } else {
            return false
        }
        let host = rest.prefix { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "-")
        }
        guard !host.isEmpty else { return false }
        rest = rest.dropFirst(host.count)
        if rest.first == UInt8(ascii: ":") {
            let port = rest.dropFirst().prefix { $0 >= 0x30 && $0 <= 0x39 }
            guard (1...5).contains(port.count) else { return false }
            rest = rest.dropFirst(1 + port.count)
        }
        guard let first = rest.first else { return true }
        return (first == UInt8(ascii: "/") || first == UInt8(ascii: "?") || first == UInt8(ascii: "#")) && printable(rest)
    }

    /// Typed access to the fields of a JSON object, each failure naming its field.
    struct Fields {
        let object: [String: JSONValue]

        init(_ body: JSONValue, allowed: Set<String>) throws(FieldError) {
            guard let object = body.objectValue else { throw FieldError("body", "must be a JSON object") }
            if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw FieldError(unknown, "unknown field")
            }
            self.object = object
        }

        func has(_ key: String) -> Bool { object[key] != nil }

        private func value(_ key: String) -> JSONValue? {
            guard let value = object[key], !value.isNull else { return nil }
            return value
        }

        /// A non-empty string of at most `maximumLength` scalars without control characters.
        func string(_ key: String, required: Bool, maximumLength: Int = 200) throws(FieldError) -> String? {
            guard let value = value(key) else {
                if required { throw FieldError(key, "is required") }
                return nil
            }
            guard let text = value.stringValue else { throw FieldError(key, "must be a string") }
            try CatalogInput.checkText(text, field: key, maximumLength: maximumLength, lineBreaks: false)
            return text
        }

        func version(_ key: String, required: Bool) throws(FieldError) -> Version? {
            guard let text = try string(key, required: required, maximumLength: Version.maximumLength) else { return nil }
            guard let version = Version(text) else { throw FieldError(key, "not a valid version: \(text)") }
            return version
        }

        func locale(_ key: String) throws(FieldError) -> String? {
            guard let text = try string(key, required: false, maximumLength: EventValidator.maximumLocaleLength) else {
                return nil
            }
            guard EventValidator.isLocale(text) else { throw FieldError(key, "not a locale tag: \(text)") }
            return text
        }

        func date(_ key: String) throws(FieldError) -> Date? {
            guard let text = try string(key, required: false, maximumLength: 40) else { return nil }
            guard let date = Timestamp.parse(text) else { throw FieldError(key, "not an RFC 3339 timestamp") }
            return date
        }

        func bool(_ key: String) throws(FieldError) -> Bool? {
            guard let value = value(key) else { return nil }
            guard case .bool(let flag) = value else { throw FieldError(key, "must be true or false") }
            return flag
        }

        /// A number that is exactly a decimal of at most `places` digits after the point, in `range`
        /// (``JSONNumber/value(in:places:)``): never rounded to the nearest value the field can hold.
        func decimal(_ key: String, in range: ClosedRange<Int>, places: Int) throws(FieldError) -> Double? {
            guard let value = value(key) else { return nil }
            guard case .number(let number) = value, let result = number.value(in: range, places: places) else {
                let step = "0." + String(repeating: "0", count: places - 1) + "1"
                throw FieldError(key, "must be a number from \(range.lowerBound) to \(range.upperBound) in steps of \(step)")
            }
            return result
        }

        /// A number that is exactly an integer in `range` (`1.0` and `1e2` are integers; `1.5` is not).
        func integer(_ key: String, in range: ClosedRange<Int>) throws(FieldError) -> Int? {
            guard let value = value(key) else { return nil }
            guard case .number(let number) = value, let result = number.integer(in: range) else {
                throw FieldError(key, "must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return result
        }

        func array(_ key: String) throws(FieldError) -> [JSONValue]? {
            guard let value = value(key) else { return nil }
            guard case .array(let items) = value else { throw FieldError(key, "must be an array") }
            return items
        }

        func platformMap(
            _ key: String, validate: (String, String) throws(FieldError) -> Void
        ) throws(FieldError) -> [String: String] {
            guard let value = value(key) else { return [:] }
            guard let object = value.objectValue else { throw FieldError(key, "must be an object of platform → value") }
            var result: [String: String] = [:]
            for (platform, entry) in object.sorted(by: { $0.key < $1.key }) {
                let field = "\(key).\(platform)"
                guard EventValidator.isPlatform(platform) else { throw FieldError(field, "not a platform name") }
                guard let text = entry.stringValue else { throw FieldError(field, "must be a string") }
                try validate(field, text)
                result[platform] = text
            }
            return result
        }

        /// `{locale: [line, …]}` with locale tags as section 4 reads them.
        func notes(_ key: String) throws(FieldError) -> [String: [String]]? {
            guard let value = value(key) else { return nil }
            guard let object = value.objectValue else { throw FieldError(key, "must be an object of locale → lines") }
            var notes: [String: [String]] = [:]
            var seen: Set<String> = []
            for (locale, lines) in object.sorted(by: { $0.key < $1.key }) {
                guard EventValidator.isLocale(locale) else { throw FieldError("\(key).\(locale)", "unknown locale format") }
                guard seen.insert(LocaleTag.normalize(locale)).inserted else {
                    throw FieldError(
                        "\(key).\(locale)", "the same locale twice (tags match ignoring case and _/-)", kind: .inconsistent)
                }
                guard case .array(let items) = lines, items.count <= maximumNoteLines else {
                    throw FieldError("\(key).\(locale)", "must be an array of at most \(maximumNoteLines) strings")
                }
                notes[locale] = try items.enumerated().map { (index, item) throws(FieldError) in
                    let field = "\(key).\(locale)[\(index)]"
                    guard let line = item.stringValue else { throw FieldError(field, "must be a string") }
                    try CatalogInput.checkText(line, field: field, maximumLength: maximumNoteLength, lineBreaks: true, allowEmpty: true)
                    return line
                }
            }
            return notes
        }
    }
}
