import Foundation
import Testing
import UpshiftCore

/// Rule definitions: each kind read with its defaults, and every bad definition refused naming its field.
@Suite struct RuleDefinitionTests {
    static func parse(_ text: String) throws -> RuleDefinition {
        try RuleDefinition(json: JSONParser.parse(Array(text.utf8)))
    }

    @Test func eachKindIsReadAndANewRuleIsADryRun() throws {
        #expect(try Self.parse(#"{"kind":"halt_on_health","mode":"guarded"}"#) == RuleDefinition(kind: .haltOnHealth(.guarded)))
        #expect(
            try Self.parse(#"{"kind":"halt_on_health","mode":"threshold","excess":0.015,"minimumInstalls":500,"state":"live"}"#)
                == RuleDefinition(kind: .haltOnHealth(.threshold(excess: 0.015, minimumInstalls: 500)), state: .live))
        #expect(
            try Self.parse(#"{"kind":"halt_on_prompts","blockedRate":0.3,"minimumInstalls":100,"state":"off"}"#)
                == RuleDefinition(kind: .haltOnPrompts(skip: nil, blocked: 0.3, unfinished: nil, minimumInstalls: 100), state: .off))
        #expect(try Self.parse(#"{"kind":"advance","state":"dry-run"}"#) == RuleDefinition(kind: .advance))
        #expect(
            try Self.parse(#"{"kind":"raise_minimum","version":"2.0","share":0.95,"windowDays":14,"maximumForced":200}"#)
                == RuleDefinition(kind: .raiseMinimum(RaiseMinimumRule(version: Version("2.0")!, share: 0.95, windowDays: 14, maximumForced: 200))))
    }

    @Test(arguments: [
        (#"[]"#, "body"),
        (#"{}"#, "kind"),
        (#"{"kind":"halt_on_everything"}"#, "kind"),
        (#"{"kind":7}"#, "kind"),
        (#"{"kind":"advance","extra":1}"#, "extra"),
        (#"{"kind":"advance","state":"on"}"#, "state"),
        (#"{"kind":"halt_on_health"}"#, "mode"),
        (#"{"kind":"halt_on_health","mode":"guarded","excess":0.1}"#, "excess"),
        (#"{"kind":"halt_on_health","mode":"threshold","minimumInstalls":10}"#, "excess"),
        (#"{"kind":"halt_on_health","mode":"threshold","excess":1.5,"minimumInstalls":10}"#, "excess"),
        (#"{"kind":"halt_on_health","mode":"threshold","excess":0.1}"#, "minimumInstalls"),
        (#"{"kind":"halt_on_prompts","minimumInstalls":10}"#, "skipRate"),
        (#"{"kind":"halt_on_prompts","skipRate":-0.1,"minimumInstalls":10}"#, "skipRate"),
        (#"{"kind":"halt_on_prompts","skipRate":0.2,"minimumInstalls":0}"#, "minimumInstalls"),
        (#"{"kind":"raise_minimum","version":"two","share":0.9,"windowDays":7,"maximumForced":10}"#, "version"),
        (#"{"kind":"raise_minimum","share":0.9,"windowDays":7,"maximumForced":10}"#, "version"),
        (#"{"kind":"raise_minimum","version":"2.0","share":90,"windowDays":7,"maximumForced":10}"#, "share"),
        (#"{"kind":"raise_minimum","version":"2.0","share":0.9,"windowDays":91,"maximumForced":10}"#, "windowDays"),
        (#"{"kind":"raise_minimum","version":"2.0","share":0.9,"windowDays":7}"#, "maximumForced"),
    ])
    func aBadDefinitionNamesItsField(_ body: String, _ field: String) {
        #expect(throws: FieldError.self) { try Self.parse(body) }
        do {
            _ = try Self.parse(body)
        } catch let error as FieldError {
            #expect(error.field == field, "\(body): \(error)")
        } catch {
            Issue.record("\(body): \(error)")
        }
    }

    @Test func ruleIDs() {
        for id in ["a", "halt-bad-releases", "0", String(repeating: "a", count: 63)] { #expect(RuleDefinition.isID(id), "\(id)") }
        for id in ["", "-a", "A", "a_b", "a.b", "ä", String(repeating: "a", count: 64), "a b"] { #expect(!RuleDefinition.isID(id), "\(id)") }
    }
}
