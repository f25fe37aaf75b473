import Foundation

/// The body of `POST /v1/events`: `{"events": [...]}`.
public struct IncomingBatch: Sendable {
    public var events: [IncomingEvent]

    public init(events: [IncomingEvent]) {
        self.events = events
    }

    /// Reads a body with ``JSONParser``: members other than `events`, and the members of an event that
    /// no rule reads, are checked but not built; the limit error comes at the `maximumEvents + 1`th
    /// element, before it is read. An element that is not an object costs no more than skipping it.
    public static func parse(_ bytes: [UInt8], maximumEvents: Int) throws(JSONParseError) -> IncomingBatch {
        var parser = JSONParser(bytes)
        var events: [IncomingEvent]?
        guard try parser.peek() == UInt8(ascii: "{") else {
            throw JSONParseError(path: "", message: "the body must be a JSON object {\"events\": [...]}")
        }
        try parser.members(depth: 0) { (parser, key) throws(JSONParseError) in
            guard key == "events" else { return try parser.skip(depth: 1) }
            var list: [IncomingEvent] = []
            try parser.elements(depth: 1, maximumElements: maximumEvents) { (parser, _) throws(JSONParseError) in
                list.append(try IncomingEvent(parser: &parser, depth: 2))
            }
            events = list
        }
        try parser.end()
        guard let events else { throw JSONParseError(path: "events", message: "is required") }
        return IncomingBatch(events: events)
    }
}

/// One element of a posted batch, read leniently: a wrong type or a bad value in one event is a
/// per-event rejection (docs/ARCHITECTURE.md, "Parse, counting"), never a failure of the whole batch.
public struct IncomingEvent: Sendable {
    public enum Field: String, CaseIterable, Sendable {
        case id, type, occurredAt, installId, platform, appVersion, build, osVersion, locale, appId
        case promptKind, targetVersion, dismissAction, fromVersion

        /// The field's place in ``IncomingEvent``'s values (declaration order).
        fileprivate var position: Int {
            switch self {
            case .id: 0
            case .type: 1
            case .occurredAt: 2
            case .installId: 3
            case .platform: 4
            case .appVersion: 5
            case .build: 6
            case .osVersion: 7
            case .locale: 8
            case .appId: 9
            case .promptKind: 10
            case .targetVersion: 11
            case .dismissAction: 12
            case .fromVersion: 13
            }
        }
    }

    private static let fieldCount = Field.allCases.count
    /// At most this many names are listed in a result's `ignored`, each at most this many UTF-8 bytes.
    public static let maximumIgnored = 16
    public static let maximumIgnoredNameLength = 64

    /// False when the element was not a JSON object.
    public private(set) var isObject = true
    /// The string value of each field, by ``Field/position`` (a dictionary hashed every field of every event).
    private var strings = [String?](repeating: nil, count: Self.fieldCount)
    public private(set) var build: Int?
    /// The names of members that are no event field and not `null`, in the order posted (the first
    /// ``maximumIgnored``, clipped to ``maximumIgnoredNameLength`` bytes at a Unicode scalar's end).
    private var unknown: [String] = []
    /// The first field present with a value it may not have, and why.
    public private(set) var invalid: (field: Field, message: String)?

    public init(strings: [Field: String], build: Int? = nil) {
        for (field, text) in strings { self.strings[field.position] = text }
        self.build = build
    }

    /// Reads the element at the parser; members no rule reads are skipped, `null` counts as absent.
    init(parser: inout JSONParser, depth: Int) throws(JSONParseError) {
        guard try parser.peek() == UInt8(ascii: "{") else {
            try parser.skip(depth: depth)
            isObject = false
            return
        }
        var strings = [String?](repeating: nil, count: Self.fieldCount)
        var build: Int?
        var invalid: (field: Field, message: String)?
        var unknown: [String] = []
        try parser.members(depth: depth) { (parser, key) throws(JSONParseError) in
            guard let field = Field(rawValue: key) else {
                let isNull = try parser.peek() == UInt8(ascii: "n")
                try parser.skip(depth: depth + 1)
                if !isNull, unknown.count < Self.maximumIgnored { unknown.append(Self.clipped(key)) }
                return
            }
            let first = try parser.peek()
            guard first != UInt8(ascii: "{"), first != UInt8(ascii: "[") else {
                // A container where a scalar belongs: checked as JSON, never built.
                try parser.skip(depth: depth + 1)
                if invalid == nil { invalid = (field, field == .build ? "must be an integer" : "must be a string") }
                return
            }
            switch try parser.value(depth: depth + 1) {
            case .null: break
            case .string(let text) where field != .build: strings[field.position] = text
            case .number(let number) where field == .build:
                if let value = number.integer(in: 0...EventValidator.maximumBuild) {
                    build = value
                } else if invalid == nil {
                    invalid = (field, "must be an integer from 0 to \(EventValidator.maximumBuild)")
                }
            default:
                if invalid == nil { invalid = (field, field == .build ? "must be an integer" : "must be a string") }
            }
        }
        self.strings = strings
        self.build = build
        self.invalid = invalid
        self.unknown = unknown
    }

    public subscript(field: Field) -> String? { strings[field.position] }

    /// The members no rule read, for the result's `ignored`: names that are no event field (in the order
    /// posted), then the fields of other types that this event's type does not have (`dismissAction` on a
    /// `prompt_shown`), when its type is known and they hold a string (a known field of the wrong JSON type
    /// is `invalid_field`, whatever the type). `null` members count as absent. Empty for most events.
    public var ignored: [String] {
        let typeFields = EventValidator.typeFields
        guard isObject, !unknown.isEmpty || typeFields.contains(where: { strings[$0.position] != nil }) else { return [] }
        var names = unknown
        if let type = self[.type].flatMap(EventType.init(rawValue:)) {
            let read = EventValidator.fields(of: type)
            for field in typeFields where strings[field.position] != nil && !read.contains(field) {
                names.append(field.rawValue)
            }
        }
        return Array(names.prefix(Self.maximumIgnored))
    }

    /// `name` cut to at most ``maximumIgnoredNameLength`` UTF-8 bytes at a Unicode scalar's end: never
    /// empty, and never the name of a field (those are far shorter than what a cut leaves, 61 bytes or more).
    private static func clipped(_ name: String) -> String {
        guard name.utf8.count > maximumIgnoredNameLength else { return name }
        var scalars = String.UnicodeScalarView()
        var length = 0
        for scalar in name.unicodeScalars {
            length += UTF8.width(scalar)
            guard length <= maximumIgnoredNameLength else { break }
            scalars.append(scalar)
        }
        return String(scalars)
    }
}

/// Why one event of a batch was rejected.
public struct EventRejection: Error, Sendable, Equatable {
    /// A stable, machine-readable code (`reserved_type`, `invalid_field`, …).
    public var code: String
    /// The field at fault, when there is one.
    public var field: String?
    public var message: String
    /// The event, valid but for being more than 30 days old (`occurred_too_long_ago`): it may be a retry
    /// of one the server stored when it was recent.
    public var tooOld: Event?

    public init(code: String, field: String? = nil, message: String) {
        self.code = code
        self.field = field
        self.message = message
    }

    static func missing(_ field: IncomingEvent.Field) -> EventRejection {
        EventRejection(code: "missing_field", field: field.rawValue, message: "\(field.rawValue) is required")
    }

    static func invalid(_ field: IncomingEvent.Field, _ message: String) -> EventRejection {
        EventRejection(code: "invalid_field", field: field.rawValue, message: "\(field.rawValue): \(message)")
    }
}

extension IngestResponse.Result {
    public init(index: Int, id: String?, status: IngestResponse.Status, rejection: EventRejection?) {
        self.init(index: index, id: id, status: status, error: rejection?.code, field: rejection?.field, message: rejection?.message)
    }
}
