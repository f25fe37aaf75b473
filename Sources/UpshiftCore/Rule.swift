import Foundation

extension RuleDefinition {
    /// The definition as `init(json:)` reads it: the kind's fields and `state`.
    public var json: [String: JSONValue] {
        func number(_ value: Double) -> JSONValue { .number(JSONNumber(value)) }
        func number(_ value: Int) -> JSONValue { .number(JSONNumber(value)) }
        var object: [String: JSONValue] = ["kind": .string(kind.name), "state": .string(state.rawValue)]
        switch kind {
        case .haltOnHealth(.guarded):
            object["mode"] = .string("guarded")
        case .haltOnHealth(.threshold(let excess, let minimumInstalls)):
            object["mode"] = .string("threshold")
            object["excess"] = number(excess)
            object["minimumInstalls"] = number(minimumInstalls)
        case .haltOnPrompts(let skip, let blocked, let unfinished, let minimumInstalls):
            object["skipRate"] = skip.map(number)
            object["blockedRate"] = blocked.map(number)
            object["unfinishedRate"] = unfinished.map(number)
            object["minimumInstalls"] = number(minimumInstalls)
        case .advance:
            break
        case .raiseMinimum(let rule):
            object["version"] = .string(rule.version.text)
            object["share"] = number(rule.share)
            object["windowDays"] = number(rule.windowDays)
            object["maximumForced"] = number(rule.maximumForced)
        }
        return object
    }
}

/// A rule as the catalog stores it (docs/ARCHITECTURE.md, "What the catalog holds"): its id, unique per
/// app and platform, its definition, the revision each write advances (`ETag: "n"`), and when it was last
/// written (a rule that a person overrode acts again only after a later write of the rule).
public struct Rule: Sendable, Equatable, Codable {
    public var id: String
    public var platform: Platform
    public var definition: RuleDefinition
    public var revision: Int
    public var writtenAt: Date

    public init(id: String, platform: Platform, definition: RuleDefinition, revision: Int = 0, writtenAt: Date) {
        self.id = id
        self.platform = platform
        self.definition = definition
        self.revision = revision
        self.writtenAt = writtenAt
    }

    /// The actor of the catalog writes a rule makes: `rule:<id>`.
    public var actor: String { Self.actorPrefix + id }
    public static let actorPrefix = "rule:"

    enum CodingKeys: String, CodingKey { case id, platform, revision, writtenAt }

    public func encode(to encoder: any Encoder) throws {
        var object = definition.json
        object["id"] = .string(id)
        object["platform"] = .string(platform.rawValue)
        object["revision"] = .number(JSONNumber(revision))
        object["writtenAt"] = .string(Timestamp.format(writtenAt))
        try JSONValue.object(object).encode(to: encoder)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        platform = try container.decode(Platform.self, forKey: .platform)
        revision = try container.decodeIfPresent(Int.self, forKey: .revision) ?? 0
        writtenAt = try container.decode(Date.self, forKey: .writtenAt)
        guard var object = try JSONValue(from: decoder).objectValue else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "a rule is an object"))
        }
        for key in ["id", "platform", "revision", "writtenAt"] { object[key] = nil }
        do {
            definition = try RuleDefinition(json: .object(object))
        } catch {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "\(error)"))
        }
    }
}
