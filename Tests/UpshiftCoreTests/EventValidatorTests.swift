import Foundation
import Testing
import UpshiftCore

/// The per-event rules (docs/ARCHITECTURE.md, "Validate each event."), one case per rule.
@Suite struct EventValidatorTests {
    static let now = Timestamp.parse("2026-04-01T12:00:00Z")!
    let validator = EventValidator()

    static func event(_ overrides: [IncomingEvent.Field: String?] = [:], build: Int? = nil) -> IncomingEvent {
        var fields: [IncomingEvent.Field: String] = [
            .id: "0190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9d",
            .type: "launched",
            .occurredAt: "2026-04-01T11:59:00Z",
            .installId: "9F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F",
            .platform: "ios",
            .appVersion: "1.8.0",
        ]
        for (field, value) in overrides { fields[field] = value }
        return IncomingEvent(strings: fields, build: build)
    }

    func rejection(_ event: IncomingEvent) -> EventRejection? {
        if case .failure(let rejection) = validator.validate(event, appId: "expenses", now: Self.now) { return rejection }
        return nil
    }

    @Test func aValidEventKeepsItsFieldsAndPutsTheRestInData() throws {
        let result = validator.validate(
            Self.event([.type: "prompt_dismissed", .promptKind: "soft", .targetVersion: "1.9.0", .dismissAction: "skip",
                        .osVersion: "17.4", .locale: "de_AT"], build: 42),
            appId: "expenses", now: Self.now)
        let event = try result.get()
        #expect(event.type == .promptDismissed)
        #expect(event.appId == "expenses")
        #expect(event.installId.uuidString == "9F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F")
        let data = try JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any]
        #expect(data?["build"] as? Int == 42)
        #expect(data?["osVersion"] as? String == "17.4")
        #expect(data?["locale"] as? String == "de_AT")
        #expect(data?["promptKind"] as? String == "soft")
        #expect(data?["targetVersion"] as? String == "1.9.0")
        #expect(data?["dismissAction"] as? String == "skip")
    }

    @Test func checkedIsReservedForTheServer() {
        #expect(rejection(Self.event([.type: "checked"]))?.code == "reserved_type")
    }

    @Test func unknownTypesAreRejected() {
        #expect(rejection(Self.event([.type: "installed"]))?.code == "unknown_type")
    }

    @Test func anotherAppsIdIsRejected() {
        #expect(rejection(Self.event([.appId: "other"]))?.code == "app_mismatch")
        #expect(rejection(Self.event([.appId: "expenses"])) == nil)
    }

    @Test func occurredAtMoreThanADayAheadIsRejected() {
        #expect(rejection(Self.event([.occurredAt: "2026-04-02T12:00:01Z"]))?.code == "occurred_in_future")
        #expect(rejection(Self.event([.occurredAt: "2026-04-02T11:59:59Z"])) == nil)
    }

    @Test func occurredAtMoreThanThirtyDaysBehindIsRejected() {
        let old = rejection(Self.event([.occurredAt: "2026-03-02T11:59:59Z"]))
        #expect(old?.code == "occurred_too_long_ago")
        // The server looks the event up (a retry of one stored while it was recent is a duplicate)…
        #expect(old?.tooOld?.id.uuidString == "0190F5C8-7D2E-7A1B-9C3D-4E5F6A7B8C9D")
        #expect(old?.tooOld?.occurredAt == Timestamp.parse("2026-03-02T11:59:59Z"))
        #expect(rejection(Self.event([.occurredAt: "2026-03-02T12:00:01Z"])) == nil)
        // …but an old event that is also invalid is rejected for that, and never looked up.
        let invalid = rejection(Self.event([.occurredAt: "2026-03-02T11:59:59Z", .appVersion: "one"]))
        #expect(invalid?.code == "invalid_field")
        #expect(invalid?.tooOld == nil)
    }

    @Test(arguments: [IncomingEvent.Field.id, .type, .occurredAt, .installId, .platform, .appVersion])
    func requiredFieldsMustBePresent(_ field: IncomingEvent.Field) {
        let result = rejection(Self.event([field: String?.none]))
        #expect(result?.code == "missing_field")
        #expect(result?.field == field.rawValue)
    }

    @Test(arguments: [
        (IncomingEvent.Field.id, "not-a-uuid"), (.installId, "1234"), (.occurredAt, "2026-04-01 12:00:00"),
        (.occurredAt, "2026-02-30T12:00:00Z"), (.appVersion, "v1.2"), (.appVersion, "1..2"),
        (.osVersion, "seventeen"), (.platform, "iOS"), (.platform, String(repeating: "a", count: 33)),
        (.locale, "english-language-tag-that-is-far-too-long"), (.locale, "e"), (.locale, "en@"),
        (.locale, "@calendar=japanese"), (.locale, "en_US@calendar japanese"), (.locale, "en@rg=\u{0}"),
        (.locale, "en_a_b_c_d@rg=gbzzzz"), (.locale, "en_US@" + String(repeating: "a", count: 65)),
    ])
    func invalidValuesNameTheirField(_ field: IncomingEvent.Field, _ value: String) {
        let result = rejection(Self.event([field: value]))
        #expect(result?.code == "invalid_field", "\(field) = \(value)")
        #expect(result?.field == field.rawValue)
    }

    /// Apple devices report ICU keywords after `@`: they are dropped, and the tag is what is stored.
    @Test(arguments: [
        ("en_JP@calendar=japanese", "en_JP"), ("en_US@rg=gbzzzz", "en_US"), ("ar_SA@numbers=latn", "ar_SA"),
        ("zh_Hant_TW@collation=stroke;calendar=roc", "zh_Hant_TW"), ("de", "de"), ("en_a_b_c_d", "en_a_b_c_d"),
        ("ca_ES_VALENCIA@x=y", "ca_ES_VALENCIA"), ("en_US@" + String(repeating: "a", count: 64), "en_US"),
    ])
    func icuKeywordsAreDropped(_ text: String, _ stored: String) throws {
        #expect(EventValidator.localeTag(text) == stored)
        let event = try validator.validate(Self.event([.locale: text]), appId: "expenses", now: Self.now).get()
        let data = try JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any]
        #expect(data?["locale"] as? String == stored)
    }

    @Test func typeSpecificFieldsAreRequired() {
        #expect(rejection(Self.event([.type: "prompt_shown", .targetVersion: "1.9"]))?.field == "promptKind")
        #expect(rejection(Self.event([.type: "prompt_shown", .promptKind: "soft"]))?.field == "targetVersion")
        #expect(rejection(Self.event([.type: "prompt_shown", .promptKind: "hard", .targetVersion: "1.9"]))?.code == "invalid_field")
        #expect(rejection(Self.event([.type: "prompt_dismissed", .promptKind: "soft", .targetVersion: "1.9"]))?.field == "dismissAction")
        #expect(rejection(Self.event([.type: "prompt_dismissed", .promptKind: "soft", .targetVersion: "1.9", .dismissAction: "never"]))?.code == "invalid_field")
        #expect(rejection(Self.event([.type: "updated"]))?.field == "fromVersion")
        #expect(rejection(Self.event([.type: "updated", .fromVersion: "x"]))?.code == "invalid_field")
        #expect(rejection(Self.event([.type: "blocked"]))?.field == "targetVersion")
        #expect(rejection(Self.event([.type: "update_started", .promptKind: "force", .targetVersion: "2.0"])) == nil)
        #expect(rejection(Self.event([.type: "whats_new_shown"])) == nil)
        #expect(rejection(Self.event([.type: "abnormal_exit"])) == nil)
    }

    @Test func negativeBuildIsRejected() {
        #expect(rejection(Self.event(build: -1))?.field == "build")
    }

    /// A member is read as a field exactly when its name is the field's, byte for byte: other cases,
    /// prefixes, extensions, accents and snake case are members no rule reads.
    @Test func membersAreReadAsFieldsOnlyUnderTheirExactNames() throws {
        var names = IncomingEvent.Field.allCases.map(\.rawValue)
        for field in IncomingEvent.Field.allCases {
            let name = field.rawValue
            names += [name.uppercased(), String(name.dropLast()), name + "s", String(name.dropLast()) + "X",
                      String(name.prefix(1)) + String(name.dropFirst().reversed()), name.replacingOccurrences(of: "e", with: "\u{E9}")]
        }
        names += ["", "i", "ty", "appid", "install_id", "osversion", "promptkind", "fromversion", "targetversion"]
        for name in Set(names) {
            let body = Array(#"{"events": [{"\#(name)": "x"}]}"#.utf8)
            let event = try #require(try IncomingBatch.parse(body, maximumEvents: 500).events.first)
            for field in IncomingEvent.Field.allCases where field != .build {
                #expect((event[field] == "x") == (field.rawValue == name), "\(name) read as \(field)")
            }
            #expect((event.invalid?.field == .build) == (name == "build"), "\(name)")
        }
    }

    /// What a sender is told it sent in vain: a misspelt name, a field of another type; `null` is absent.
    @Test func theMembersNoRuleReadsAreNamedInIgnored() throws {
        let body = #"""
            {"events": [
              {"type": "launched", "osVerison": "17.4", "extra": null, "nested": {"a": [1]}, "appVersion": "1.0"},
              {"type": "prompt_shown", "dismissAction": "later", "promptKind": "soft", "fromVersion": null},
              {"type": "launched", "osVersion": "17.4", "build": 3},
              {"type": "no_such_type", "dismissAction": "later", "x": 1},
              {"dismissAction": "later"},
              [1, 2]
            ]}
            """#
        let events = try IncomingBatch.parse(Array(body.utf8), maximumEvents: 500).events
        #expect(events.map(\.ignored) == [["osVerison", "nested"], ["dismissAction"], [], ["x"], [], []])
    }

    /// Naming what was ignored changed no rule of acceptance: a known field of the wrong JSON type is
    /// `invalid_field` even where the event's type does not have it, and is not listed.
    @Test func aKnownFieldOfTheWrongTypeIsStillRejected() throws {
        let body = #"{"events": [{"type": "launched", "dismissAction": 5}]}"#
        let event = try #require(try IncomingBatch.parse(Array(body.utf8), maximumEvents: 500).events.first)
        #expect(rejection(event)?.code == "invalid_field")
        #expect(rejection(event)?.field == "dismissAction")
        #expect(event.ignored == [])
    }

    @Test func ignoredNamesAreBoundedInNumberAndBytes() throws {
        let long = String(repeating: "\u{E9}", count: 50)  // 100 bytes
        let emoji = String(repeating: "a", count: 62) + "🙂"  // 66 bytes: the emoji does not fit
        // One character of 201 bytes (a letter and 100 combining accents): cut between its scalars, never
        // to nothing, and never to a field's name.
        let accents = String(repeating: "\u{301}", count: 100)
        var members = [#""\#(long)": 1"#, #""\#(emoji)": 1"#, #""a\#(accents)": 1"#, #""typex\#(accents)": 1"#]
        members += (0..<20).map { #""u\#($0)": 1"# }
        let body = #"{"events": [{\#(members.joined(separator: ","))}]}"#
        let ignored = try #require(try IncomingBatch.parse(Array(body.utf8), maximumEvents: 500).events.first).ignored
        #expect(ignored.count == IncomingEvent.maximumIgnored)
        #expect(ignored[0] == String(repeating: "\u{E9}", count: 32))
        #expect(ignored[1] == String(repeating: "a", count: 62))
        #expect(ignored[2] == "a" + String(repeating: "\u{301}", count: 31))  // 1 + 62 bytes
        #expect(ignored[3] == "typex" + String(repeating: "\u{301}", count: 29))  // 5 + 58 bytes
        #expect(ignored[4...] == ArraySlice((0..<12).map { "u\($0)" }))
        #expect(ignored.allSatisfy { !$0.isEmpty && $0.utf8.count <= IncomingEvent.maximumIgnoredNameLength })
    }

    /// `EventValidator.fields(of:)`, which names what `ignored` leaves out, is what validation stores.
    @Test(arguments: EventType.allCases.filter { $0 != .checked })
    func theFieldsOfATypeAreTheOnesItStores(_ type: EventType) throws {
        let event = try validator.validate(
            Self.event([.type: type.rawValue, .promptKind: "soft", .targetVersion: "1.9.0", .dismissAction: "later", .fromVersion: "1.7.0"]),
            appId: "expenses", now: Self.now
        ).get()
        let data = try #require(try JSONSerialization.jsonObject(with: Data(event.data.utf8)) as? [String: Any])
        let stored = EventValidator.typeFields.filter { data[$0.rawValue] != nil }
        #expect(stored == EventValidator.fields(of: type))
    }

    @Test func wrongJSONTypesAreRejectedPerEvent() throws {
        let body = #"{"events": [42, {"id": 7}, {"build": "12"}]}"#
        let batch = try IncomingBatch.parse(Array(body.utf8), maximumEvents: 500)
        #expect(batch.events.count == 3)
        #expect(rejection(batch.events[0])?.code == "invalid_event")
        #expect(rejection(batch.events[1])?.field == "id")
        #expect(rejection(batch.events[2])?.field == "build")
    }
}

@Suite struct TimestampTests {
    @Test(arguments: [
        ("2026-04-01T12:30:00Z", 1_775_046_600.0), ("2026-04-01T12:30:00.250Z", 1_775_046_600.25),
        ("2026-04-01T14:30:00+02:00", 1_775_046_600.0), ("2026-04-01t12:30:00z", 1_775_046_600.0),
        ("2024-02-29T00:00:00Z", 1_709_164_800.0),
    ])
    func parsesRFC3339(_ text: String, _ seconds: Double) throws {
        let date = try #require(Timestamp.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_5)
    }

    @Test(arguments: ["2026-04-01", "2026-13-01T00:00:00Z", "2026-04-01T24:00:00Z", "2026-04-01T12:30:00", "2025-02-29T00:00:00Z", "2026-04-01T12:30:00.Z"])
    func rejectsOtherText(_ text: String) {
        #expect(Timestamp.parse(text) == nil)
    }

    /// An offset or a fraction that carries the instant out of years 0000–9999 would be written as
    /// text (`10000-…`, `-001-…`) that `parse` refuses: refused here, so nothing stored can be unreadable.
    @Test(arguments: [
        "9999-12-31T23:59:59-00:01", "9999-12-31T12:00:00-23:59", "9999-12-31T23:59:59.9996Z",
        "0000-01-01T00:00:00+00:01", "0000-01-01T11:00:00+23:59",
    ])
    func rejectsInstantsOutsideTheYearsItCanWrite(_ text: String) {
        #expect(Timestamp.parse(text) == nil)
    }

    @Test(arguments: [
        ("9999-12-31T23:59:59.999Z", "9999-12-31T23:59:59.999Z"), ("9999-12-31T23:59:59.9994Z", "9999-12-31T23:59:59.999Z"),
        ("9999-12-31T23:59:59+00:01", "9999-12-31T23:58:59.000Z"), ("0000-01-01T00:00:00Z", "0000-01-01T00:00:00.000Z"),
        ("0000-01-01T00:00:00-00:01", "0000-01-01T00:01:00.000Z"), ("0000-01-01T00:00:00.0004+00:00", "0000-01-01T00:00:00.000Z"),
    ])
    func theEdgesOfTheRangeRoundTrip(_ text: String, _ formatted: String) throws {
        let date = try #require(Timestamp.parse(text))
        #expect(Timestamp.format(date) == formatted)
        #expect(Timestamp.parse(Timestamp.format(date)) != nil)
    }

    @Test func formatsRoundTrip() {
        let date = Date(timeIntervalSince1970: 1_775_046_600.123)
        #expect(Timestamp.format(date) == "2026-04-01T12:30:00.123Z")
        #expect(Timestamp.parse(Timestamp.format(date)).map { abs($0.timeIntervalSince(date)) < 0.001 } == true)
    }
}

@Suite struct WireFormatTests {
    @Test(arguments: ["0190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9d", "9F1C2D3E-4B5A-4C6D-8E7F-0A1B2C3D4E5F", "00000000-0000-0000-0000-000000000000"])
    func uuidTextAgreesWithFoundation(_ text: String) {
        #expect(UUIDText.parse(text) == UUID(uuidString: text))
        #expect(UUIDText.parse(text) != nil)
    }

    @Test(arguments: ["", "0190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9", "0190f5c8x7d2e-7a1b-9c3d-4e5f6a7b8c9d", "g190f5c8-7d2e-7a1b-9c3d-4e5f6a7b8c9d", "0190f5c87d2e7a1b9c3d4e5f6a7b8c9d1234"])
    func uuidTextRefusesOtherText(_ text: String) {
        #expect(UUIDText.parse(text) == nil)
    }

    /// A key's stored form is the lowercase hex SHA-256 of its bytes (FIPS 180-4's test vectors).
    @Test func keyDigestsAreLowercaseHexSHA256() {
        #expect(SHA256Hex.digest(Data("abc".utf8)) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(SHA256Hex.digest(Data()) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(KeySecret.digest("abc") == SHA256Hex.digest(Data("abc".utf8)))
    }

    /// Random ids are version 4 and variant 10 (as `UUID()` makes them), and not repeated.
    @Test func randomUUIDsAreVersion4AndDistinct() {
        let ids = (0..<10_000).map { _ in UUIDText.random() }
        #expect(Set(ids).count == ids.count)
        for id in ids {
            #expect(id.uuid.6 >> 4 == 4)
            #expect(id.uuid.8 >> 6 == 0b10)
            #expect(UUIDText.parse(id.uuidString) == id)
        }
        // Every other bit takes both values across the ids.
        let bytes = ids.map { id in withUnsafeBytes(of: id.uuid) { Array($0) } }
        for position in 0..<16 {
            let fixed: UInt8 = position == 6 ? 0xF0 : position == 8 ? 0xC0 : 0
            let ored = bytes.reduce(UInt8(0)) { $0 | $1[position] }
            let anded = bytes.reduce(UInt8(0xFF)) { $0 & $1[position] }
            #expect(ored | fixed == 0xFF && anded & ~fixed == 0, "byte \(position)")
        }
    }

    @Test func ingestResponseJSONDecodesToItself() throws {
        let response = IngestResponse(results: [
            .init(index: 0, id: "a\"b", status: .accepted),
            .init(index: 1, id: nil, status: .rejected, rejection: EventRejection(code: "invalid_field", field: "appVersion", message: "appVersion: not a valid version\n")),
            .init(index: 2, id: "x", status: .duplicate),
        ])
        let decoded = try JSONDecoder().decode(IngestResponse.self, from: Data(response.json.utf8))
        #expect(decoded == response)
    }
}
