import Foundation

/// The body of `POST /v1/events`: `{"events": [...]}`.
public struct IncomingBatch: Decodable, Sendable {
    public var events: [IncomingEvent]
}

/// One element of a posted batch, decoded leniently: a wrong type or a bad value in one event is a
/// per-event rejection (DESIGN.md section 5), never a failure of the whole batch.
public struct IncomingEvent: Decodable, Sendable {
    public enum Field: String, CodingKey, CaseIterable, Sendable {
        case id, type, occurredAt, installId, platform, appVersion, build, osVersion, locale, appId
        case promptKind, targetVersion, dismissAction, fromVersion
    }

    /// False when the element was not a JSON object.
    public private(set) var isObject = true
    public private(set) var strings: [Field: String] = [:]
    public private(set) var build: Int?
    /// Fields present with a JSON type they may not have.
    public private(set) var wrongType: [Field] = []

    public init(strings: [Field: String], build: Int? = nil) {
        self.strings = strings
        self.build = build
    }

    public init(from decoder: any Decoder) throws {
        guard let container = try? decoder.container(keyedBy: Field.self) else {
            isObject = false
            return
        }
        for field in container.allKeys {
            if (try? container.decodeNil(forKey: field)) == true { continue }
            if field == .build {
                if let value = try? container.decode(Int.self, forKey: field) {
                    build = value
                } else {
                    wrongType.append(field)
                }
            } else if let value = try? container.decode(String.self, forKey: field) {
                strings[field] = value
            } else {
                wrongType.append(field)
            }
        }
    }

    public subscript(field: Field) -> String? { strings[field] }
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
