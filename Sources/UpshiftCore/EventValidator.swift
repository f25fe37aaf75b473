import Foundation

/// The per-event rules (docs/ARCHITECTURE.md, "Validate each event"; docs/OPERATIONS.md, "Limits"), as a
/// pure function of the event, the key's app and `now`.
public struct EventValidator: Sendable {
    /// How far ahead of the server's clock `occurredAt` may be.
    public static let maximumAhead: TimeInterval = 24 * 3600
    /// How far behind the server's clock `occurredAt` may be.
    public static let maximumBehind: TimeInterval = 30 * 86_400
    /// Locale tags (BCP 47 style, `_` read as `-`).
    public static let maximumLocaleLength = 35
    /// The largest `build` number accepted (JSON-safe integer).
    public static let maximumBuild = 9_007_199_254_740_991

    public init() {}

    /// Validates one event posted with a key of app `appId` at server time `now`.
    public func validate(_ event: IncomingEvent, appId: AppID, now: Date) -> Result<Event, EventRejection> {
        do {
            return .success(try check(event, appId: appId, now: now))
        } catch let rejection as EventRejection {
            return .failure(rejection)
        } catch {
            return .failure(EventRejection(code: "invalid_event", message: "invalid event"))
        }
    }

    private func check(_ event: IncomingEvent, appId: AppID, now: Date) throws -> Event {
        guard event.isObject else {
            throw EventRejection(code: "invalid_event", message: "an event must be a JSON object")
        }
        if let (field, message) = event.invalid {
            throw EventRejection.invalid(field, message)
        }
        let id = try uuid(event, .id)
        guard let typeName = event[.type] else { throw EventRejection.missing(.type) }
        if let reserved = ServerEventType(rawValue: typeName) {
            throw EventRejection(code: "reserved_type", field: "type", message: "\(reserved.rawValue) events are written by the server only")
        }
        guard let type = EventType(rawValue: typeName) else {
            throw EventRejection(code: "unknown_type", field: "type", message: "unknown event type")
        }
        if let claimed = event[.appId], claimed != appId.rawValue {
            throw EventRejection(code: "app_mismatch", field: "appId", message: "appId is not the key's app")
        }
        guard let occurredText = event[.occurredAt] else { throw EventRejection.missing(.occurredAt) }
        guard let occurredAt = Timestamp.parse(occurredText) else {
            throw EventRejection.invalid(.occurredAt, "not an RFC 3339 timestamp")
        }
        if occurredAt.timeIntervalSince(now) > Self.maximumAhead {
            throw EventRejection(
                code: "occurred_in_future", field: "occurredAt", message: "occurredAt is more than 24 h ahead")
        }
        let installId = try uuid(event, .installId)
        guard let text = event[.platform] else { throw EventRejection.missing(.platform) }
        guard let platform = Platform(validating: text) else { throw EventRejection.invalid(.platform, Platform.problem(with: text)) }
        let appVersion = try version(event, .appVersion, required: true)!
        if let build = event.build, !(0...Self.maximumBuild).contains(build) {
            throw EventRejection.invalid(.build, "must be an integer from 0 to \(Self.maximumBuild)")
        }
        var data = EventData()
        data.add("build", event.build)
        data.add("osVersion", try version(event, .osVersion, required: false))
        if let text = event[.locale] {
            guard let locale = Self.localeTag(text) else { throw EventRejection.invalid(.locale, "not a locale tag") }
            data.add("locale", locale)
        }
        // The fields read here are `fields(of: type)`; EventValidatorTests hold the two together.
        switch type {
        case .promptShown, .updateStarted:
            data.add("promptKind", try promptKind(event).rawValue)
            data.add("targetVersion", try version(event, .targetVersion, required: true))
        case .promptDismissed:
            data.add("promptKind", try promptKind(event).rawValue)
            data.add("targetVersion", try version(event, .targetVersion, required: true))
            guard let actionText = event[.dismissAction] else { throw EventRejection.missing(.dismissAction) }
            guard let action = DismissAction(rawValue: actionText) else {
                throw EventRejection.invalid(.dismissAction, "must be later or skip")
            }
            data.add("dismissAction", action.rawValue)
        case .updated:
            data.add("fromVersion", try version(event, .fromVersion, required: true))
        case .blocked:
            data.add("targetVersion", try version(event, .targetVersion, required: true))
        case .launched, .whatsNewShown, .abnormalExit, .checked:
            break
        }
        let parsed = Event(
            id: id, type: type, occurredAt: occurredAt, appId: appId, installId: installId, platform: platform,
            appVersion: appVersion, data: data.json)
        // Checked last: a retry of an event stored while it was recent is a duplicate, not a rejection,
        // and the server needs the whole event to look it up.
        if now.timeIntervalSince(occurredAt) > Self.maximumBehind {
            var rejection = EventRejection(
                code: "occurred_too_long_ago", field: "occurredAt", message: "occurredAt is more than 30 days ago")
            rejection.tooOld = parsed
            throw rejection
        }
        return parsed
    }

    /// The fields that only some event types have.
    public static let typeFields: [IncomingEvent.Field] = [.promptKind, .targetVersion, .dismissAction, .fromVersion]

    /// The type-specific fields an event of `type` has (the others of ``typeFields`` are ignored).
    public static func fields(of type: EventType) -> [IncomingEvent.Field] {
        switch type {
        case .promptShown, .updateStarted: [.promptKind, .targetVersion]
        case .promptDismissed: [.promptKind, .targetVersion, .dismissAction]
        case .updated: [.fromVersion]
        case .blocked: [.targetVersion]
        case .launched, .whatsNewShown, .abnormalExit, .checked: []
        }
    }

    private func uuid(_ event: IncomingEvent, _ field: IncomingEvent.Field) throws -> UUID {
        guard let text = event[field] else { throw EventRejection.missing(field) }
        guard let value = UUIDText.parse(text) else {
            throw EventRejection.invalid(field, "not a UUID")
        }
        return value
    }

    private func version(_ event: IncomingEvent, _ field: IncomingEvent.Field, required: Bool) throws -> String? {
        guard let text = event[field] else {
            if required { throw EventRejection.missing(field) }
            return nil
        }
        guard Version(text) != nil else { throw EventRejection.invalid(field, "not a valid version") }
        return text
    }

    private func promptKind(_ event: IncomingEvent) throws -> PromptKind {
        guard let text = event[.promptKind] else { throw EventRejection.missing(.promptKind) }
        guard let kind = PromptKind(rawValue: text) else {
            throw EventRejection.invalid(.promptKind, "must be soft or force")
        }
        return kind
    }

    /// ICU keywords after a locale tag (`@calendar=japanese;rg=gbzzzz`), which are dropped.
    public static let maximumLocaleKeywordsLength = 64

    /// The locale of a device as apps send it: a tag (``isLocale(_:)``), optionally followed by ICU keywords
    /// after `@` (`en_JP@calendar=japanese`, as Apple devices report their locale). Answers the tag without
    /// the keywords, or nil when `text` is no such locale. With keywords the tag has at most three subtags
    /// after its language (`zh_Hans_CN_POSIX`; at most 35 characters so), and the keywords are 1–64
    /// characters of letters, digits, `=`, `;`, `-` and `_`.
    public static func localeTag(_ text: String) -> String? {
        guard let at = text.utf8.firstIndex(of: UInt8(ascii: "@")) else { return isLocale(text) ? text : nil }
        let tag = String(text[..<at])
        let keywords = text.utf8[text.utf8.index(after: at)...]
        guard (1...maximumLocaleKeywordsLength).contains(keywords.count),
            keywords.allSatisfy({ isASCIILetter($0) || isASCIIDigit($0) || Array("=;-_".utf8).contains($0) }),
            isLocale(tag), tag.utf8.count(where: { $0 == UInt8(ascii: "-") || $0 == UInt8(ascii: "_") }) <= 3
        else { return nil }
        return tag
    }

    /// A language subtag of 2–8 letters, then subtags of 1–8 letters or digits, joined by `-` or `_`.
    public static func isLocale(_ text: String) -> Bool {
        guard text.utf8.count <= maximumLocaleLength else { return false }
        let parts = text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "-" || $0 == "_" })
        guard let language = parts.first, (2...8).contains(language.utf8.count),
            language.utf8.allSatisfy(isASCIILetter)
        else { return false }
        return parts.dropFirst().allSatisfy { part in
            (1...8).contains(part.utf8.count) && part.utf8.allSatisfy { isASCIILetter($0) || isASCIIDigit($0) }
        }
    }

    private static func isASCIILetter(_ byte: UInt8) -> Bool {
        (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
    }

    private static func isASCIIDigit(_ byte: UInt8) -> Bool {
        byte >= 0x30 && byte <= 0x39
    }
}
