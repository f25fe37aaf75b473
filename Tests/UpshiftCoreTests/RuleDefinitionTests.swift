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
        #expect(
            try Self.parse(#"{"kind":"halt_on_prompts","unfinishedRate":0.2,"minimumInstalls":10}"#)
                == RuleDefinition(kind: .haltOnPrompts(skip: nil, blocked: nil, unfinished: 0.2, minimumInstalls: 10)))
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
        (#"{"kind":"halt_on_prompts","unfinishedRate":1.2,"minimumInstalls":10}"#, "unfinishedRate"),
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

    /// A stored rule reads back as written: what the catalog keeps is what the API answers.
    @Test func aStoredRuleReadsBackAsWritten() throws {
        for text in [
            #"{"kind":"halt_on_health","mode":"threshold","excess":0.015,"minimumInstalls":500,"state":"live"}"#,
            #"{"kind":"halt_on_prompts","skipRate":0.25,"minimumInstalls":100}"#,
            #"{"kind":"raise_minimum","version":"2.0.1","share":0.95,"windowDays":14,"maximumForced":200,"state":"off"}"#,
            #"{"kind":"advance"}"#,
        ] {
            let rule = Rule(id: "r", platform: "ios", definition: try Self.parse(text), revision: 3, writtenAt: Date(timeIntervalSince1970: 1_780_000_000))
            let data = try CatalogCoding.encoder().encode(rule)
            #expect(try CatalogCoding.decoder().decode(Rule.self, from: data) == rule, "\(text)")
        }
    }

    /// A rule stops acting on a field a person set after it did, until it is written again; the schedule
    /// and other rules are not people.
    @Test func aPersonsLaterWriteOverridesARuleUntilItIsWrittenAgain() throws {
        let t = { (hours: Double) in Date(timeIntervalSince1970: 1_780_000_000 + hours * 3_600) }
        var rule = Rule(id: "guard", platform: "ios", definition: try Self.parse(#"{"kind":"advance"}"#), writtenAt: t(0))
        let halted = RuleOverride.Write(at: t(1), actor: "rule:guard", fields: ["rolloutPaused"])
        let resumed = RuleOverride.Write(at: t(2), actor: "owner (1234abcd)", fields: ["rolloutPaused"])
        #expect(RuleOverride.overriding(rule, field: "rolloutPaused", writes: [resumed]) == nil, "the rule never acted")
        #expect(RuleOverride.overriding(rule, field: "rolloutPaused", writes: [halted, resumed]) == resumed)
        #expect(RuleOverride.overriding(rule, field: "minimumVersion", writes: [halted, resumed]) == nil, "another field")
        for actor in ["schedule", "rule:other"] {
            let write = RuleOverride.Write(at: t(2), actor: actor, fields: ["rolloutPaused"])
            #expect(RuleOverride.overriding(rule, field: "rolloutPaused", writes: [halted, write]) == nil, "\(actor)")
        }
        #expect(RuleOverride.overriding(rule, field: "rolloutPaused", writes: [resumed, halted]) == nil, "the person came first")
        rule.writtenAt = t(3)
        #expect(RuleOverride.overriding(rule, field: "rolloutPaused", writes: [halted, resumed]) == nil, "written again since")
    }

    @Test func promptSignalsHaltAboveTheirThresholdWithEnoughInstalls() {
        func funnel(shown: Int, skip: Int, blocked: Int) -> PromptFunnelReport.Funnel {
            .init(targetVersion: "2.0.0", promptKind: "soft", shown: shown, dismissedLater: 0, dismissedSkip: skip,
                  updateStarted: 0, blocked: blocked, converted: 0, updatedAfterStart: 0)
        }
        func evaluate(
            _ funnels: [PromptFunnelReport.Funnel], starts: (Int, Int) = (0, 0), skip: Double? = nil, blocked: Double? = nil,
            unfinished: Double? = nil
        ) -> PromptRule.Evaluation {
            PromptRule.evaluate(funnels, starts: starts, skip: skip, blocked: blocked, unfinished: unfinished, minimumInstalls: 100)
        }
        #expect(evaluate([funnel(shown: 100, skip: 31, blocked: 0)], skip: 0.3).regressed)
        #expect(!evaluate([funnel(shown: 100, skip: 30, blocked: 0)], skip: 0.3).regressed)
        #expect(!evaluate([funnel(shown: 99, skip: 90, blocked: 0)], skip: 0.3).regressed)
        let both = [funnel(shown: 60, skip: 0, blocked: 0), funnel(shown: 40, skip: 0, blocked: 11)]
        #expect(evaluate(both, skip: 0.3, blocked: 0.1).regressed)
        #expect(evaluate(both, starts: (100, 26), skip: 0.3, blocked: 0.1).summary
            == "100 installs prompted: 0 skipped it (0.0 %), 11 blocked (11.0 %); 100 started updating 24 h ago or more: 26 had not updated 24 h later (26.0 %)")
        // The unfinished share counts among the starts, with at least minimumInstalls of them.
        let prompted = [funnel(shown: 1_000, skip: 0, blocked: 0)]
        #expect(evaluate(prompted, starts: (100, 26), unfinished: 0.25).regressed)
        #expect(!evaluate(prompted, starts: (100, 25), unfinished: 0.25).regressed)
        #expect(!evaluate(prompted, starts: (99, 90), unfinished: 0.25).regressed)
        #expect(!evaluate(prompted, starts: (100, 100), skip: 0.3, blocked: 0.1).regressed, "no unfinishedRate, no halt on it")
    }
}
