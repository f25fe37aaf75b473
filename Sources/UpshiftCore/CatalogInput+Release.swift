import Foundation

/// The bodies of a release: `POST …/releases` and `PATCH …/releases/{platform}/{version}`.
extension CatalogInput {
    /// A new release: every field of a release (docs/ARCHITECTURE.md, "What the catalog holds") and its
    /// `platform`, and optionally its `rolloutSchedule`, which starts at the later of `releasedAt` and `now`.
    public static func release(_ body: JSONValue, now: Date) throws(FieldError) -> Release {
        let fields = try Fields(body, allowed: releaseFields.union(["platform", "version", "reason", "rolloutSchedule"]))
        let platform = try Platform(fields.string("platform", required: true)!)
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

    /// The fields of a release edit, checked alone (on a release not yet out, at 0 %): what depends on the
    /// stored rollout (a pause needs a running schedule …) is judged when the edit meets it.
    public static func checkReleasePatch(_ body: JSONValue, platform: Platform, version: Version, now: Date) throws(FieldError) {
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

    static let releaseFields: Set<String> = [
        "build", "releasedAt", "channel", "minimumOSVersion", "maximumOSVersion", "notes", "updateURL", "status",
        "rolloutPercent", "rolloutPaused", "downloadURL", "downloadLength", "edSignature", "priority",
    ]

    static func apply(_ fields: Fields, to release: inout Release) throws(FieldError) {
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
}
