import Foundation

/// A rule as a team writes it (docs/PROJECTIONS.md, "Release health: the decisions the rules take"):
/// per app and platform, one of four kinds, each `off`, `dry-run` (the default) or `live`.
public struct RuleDefinition: Sendable, Equatable {
    public enum State: String, Sendable, CaseIterable {
        case off
        case dryRun = "dry-run"
        case live
    }

    public enum Kind: Sendable, Equatable {
        /// Halt the rollout of a release whose abnormal exits are worse than its previous release's.
        case haltOnHealth(HealthHaltMode)
        /// Halt a release when, among the installs prompted for it, the share that skipped it or that were
        /// blocked, or among those that started updating to it, the share that had not updated 24 hours
        /// later (`unfinished`), exceeds its threshold (each optional, at least one) with at least
        /// `minimumInstalls` installs counted in that share.
        case haltOnPrompts(skip: Double?, blocked: Double?, unfinished: Double?, minimumInstalls: Int)
        /// A running schedule advances only while its release's health and prompt signals hold.
        case advance
        case raiseMinimum(RaiseMinimumRule)

        public var name: String {
            switch self {
            case .haltOnHealth: "halt_on_health"
            case .haltOnPrompts: "halt_on_prompts"
            case .advance: "advance"
            case .raiseMinimum: "raise_minimum"
            }
        }
    }

    /// At most this many rules per app and platform.
    public static let maximumPerPlatform = 20

    public var kind: Kind
    public var state: State

    public init(kind: Kind, state: State = .dryRun) {
        self.kind = kind
        self.state = state
    }

    /// Whether `text` is a rule id: `^[a-z0-9][a-z0-9-]{0,62}$`.
    public static func isID(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        func allowed(_ byte: UInt8) -> Bool { (byte >= 0x61 && byte <= 0x7a) || (byte >= 0x30 && byte <= 0x39) }
        guard let first = bytes.first, bytes.count <= 63, allowed(first) else { return false }
        return bytes.dropFirst().allSatisfy { allowed($0) || $0 == UInt8(ascii: "-") }
    }

    /// Reads a rule's JSON body; each failure names its field.
    public init(json body: JSONValue) throws(FieldError) {
        let common: Set<String> = ["kind", "state"]
        guard let object = body.objectValue else { throw FieldError("body", "must be a JSON object") }
        guard let kindValue = object["kind"], !kindValue.isNull else { throw FieldError("kind", "is required") }
        guard let kindName = kindValue.stringValue else { throw FieldError("kind", "must be a string") }
        let allowed: Set<String>
        switch kindName {
        case "halt_on_health": allowed = ["mode", "excess", "minimumInstalls"]
        case "halt_on_prompts": allowed = ["skipRate", "blockedRate", "unfinishedRate", "minimumInstalls"]
        case "advance": allowed = []
        case "raise_minimum": allowed = ["version", "share", "windowDays", "maximumForced"]
        default:
            throw FieldError("kind", "must be one of halt_on_health, halt_on_prompts, advance, raise_minimum")
        }
        let fields = try CatalogInput.Fields(body, allowed: common.union(allowed))
        func rate(_ key: String, required: Bool) throws(FieldError) -> Double? {
            let value = try fields.decimal(key, in: 0...1, places: 4)
            if value == nil, required { throw FieldError(key, "is required") }
            return value
        }
        func count(_ key: String, in range: ClosedRange<Int>) throws(FieldError) -> Int {
            guard let value = try fields.integer(key, in: range) else { throw FieldError(key, "is required") }
            return value
        }
        switch kindName {
        case "halt_on_health":
            let mode = try fields.string("mode", required: true, maximumLength: 20)
            switch mode {
            case "guarded":
                for key in ["excess", "minimumInstalls"] where fields.has(key) && body[key]?.isNull == false {
                    throw FieldError(key, "only for mode threshold", kind: .inconsistent)
                }
                kind = .haltOnHealth(.guarded)
            case "threshold":
                kind = .haltOnHealth(.threshold(
                    excess: try rate("excess", required: true)!, minimumInstalls: try count("minimumInstalls", in: 1...100_000_000)))
            default:
                throw FieldError("mode", "must be guarded or threshold")
            }
        case "halt_on_prompts":
            let skip = try rate("skipRate", required: false), blocked = try rate("blockedRate", required: false)
            let unfinished = try rate("unfinishedRate", required: false)
            guard skip != nil || blocked != nil || unfinished != nil else {
                throw FieldError("skipRate", "one of skipRate, blockedRate and unfinishedRate is required")
            }
            kind = .haltOnPrompts(
                skip: skip, blocked: blocked, unfinished: unfinished, minimumInstalls: try count("minimumInstalls", in: 1...100_000_000))
        case "advance":
            kind = .advance
        default:
            kind = .raiseMinimum(RaiseMinimumRule(
                version: try fields.version("version", required: true)!, share: try rate("share", required: true)!,
                windowDays: try count("windowDays", in: 1...MinimumImpactReport.maximumWindowDays),
                maximumForced: try count("maximumForced", in: 1...100_000_000)))
        }
        if let text = try fields.string("state", required: false, maximumLength: 20) {
            guard let state = State(rawValue: text) else { throw FieldError("state", "must be off, dry-run or live") }
            self.state = state
        } else {
            state = .dryRun
        }
    }
}
