import Foundation
import Testing
import UpshiftCore

@Suite struct JSONParserTests {
    /// Every class of JSON number, read by an integer field of 0…9,007,199,254,740,991 (build) and a
    /// decimal field of 0…100 (rolloutPercent): accepted only when the exact value is in range.
    static let numbers: [(literal: String, integer: Int?, percent: Double?)] = [
        ("0", 0, 0), ("7", 7, 7), ("1.0", 1, 1), ("1e2", 100, 100), ("1E+2", 100, 100), ("-0", 0, 0),
        ("100.0", 100, 100), ("1.5", nil, 1.5), ("12.50", nil, 12.5), ("-1", nil, nil), ("-0.5", nil, nil),
        ("100.0000000000000000001", nil, nil), ("1e19", nil, nil), ("9223372036854775808", nil, nil),
        ("9223372036854775807", nil, nil), ("9007199254740991", 9_007_199_254_740_991, nil),
        ("9007199254740992", nil, nil), ("1e308", nil, nil), ("1e400", nil, nil), ("1e-400", nil, nil), ("0.005", nil, nil),
        (String(repeating: "9", count: 400), nil, nil), ("5" + String(repeating: "0", count: 400) + "e-400", 5, 5),
    ]

    @Test(arguments: numbers)
    func numbersAreReadExactly(_ literal: String, _ integer: Int?, _ percent: Double?) throws {
        let number = try #require(JSONNumber(literal: literal))
        #expect(number.integer(in: 0...9_007_199_254_740_991) == integer)
        #expect(number.value(in: 0...100, places: 2) == percent)
        // The parser keeps what it read: a document of it gives the same answers.
        guard case .number(let parsed) = try JSONParser.parse(Array(literal.utf8)) else {
            Issue.record("not a number")
            return
        }
        #expect(parsed.integer(in: 0...9_007_199_254_740_991) == integer)
    }

    @Test(arguments: ["+1", "01", ".5", "1.", "1e", "--1", "0x10", "NaN", "Infinity", "1_000", ""])
    func onlyTheJSONNumberGrammarIsANumber(_ literal: String) {
        #expect(JSONNumber(literal: literal) == nil)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(literal.utf8)) }
    }

    @Test func nonFiniteNumbersBuiltInCodeAreInNoRange() {
        #expect(JSONNumber(Double.infinity).value(in: 0...100, places: 2) == nil)
        #expect(JSONNumber(Double.nan).integer(in: Int.min...Int.max) == nil)
        #expect(JSONNumber(1.5).value(in: 0...100, places: 2) == 1.5)
        #expect(JSONNumber(1.0) == JSONNumber(literal: "1e0"))
    }

    /// A decimal field takes a value only when it is exactly a decimal of its places in range; what it
    /// takes prints back as the same decimal. Nothing is rounded to a value the field could hold.
    @Test(arguments: [
        ("12.34", 12.34), ("1.234e1", 12.34), ("12.3400", 12.34), ("0.01", 0.01), ("100", 100), ("1e2", 100), ("-0", 0),
        ("0", 0), ("0.07", 0.07), ("99.99", 99.99), ("1e-2", 0.01),
    ])
    func decimalsInTheirPlacesAreTakenExactly(_ literal: String, _ value: Double) throws {
        let number = try #require(JSONNumber(literal: literal))
        let taken = try #require(number.value(in: 0...100, places: 2))
        #expect(taken == value)
        #expect(JSONNumber(taken) == number)
    }

    @Test(arguments: ["1e-400", "0.005", "12.345", "5e-324", "100.01", "100.0000000000000000001", "-0.01", "1e400", "0.1e-2"])
    func decimalsBeyondTheirPlacesOrRangeAreRefused(_ literal: String) throws {
        #expect(try #require(JSONNumber(literal: literal)).value(in: 0...100, places: 2) == nil)
    }

    /// Text that is not Unicode, and malformed documents, are refused and named by their member.
    @Test(arguments: [
        (#"{"notes": {"en": ["ok", "\ud800"]}}"#, "notes.en[1]", "unpaired surrogate"),
        (#"{"a": "\udc00x"}"#, "a", "unpaired surrogate"),
        (#"{"a": "\ud800\u0041"}"#, "a", "unpaired surrogate"),
        ("{\"a\": \"tab\there\"}", "a", "control character"),
        (#"{"a": 1, "a": 2}"#, "a", "twice"),
        (#"{"a": [1, 2,]}"#, "a[2]", "not valid JSON"),
        (#"{"a": "\x"}"#, "a", "escape"),
        (#"{"a": 1} x"#, "", "after the JSON value"),
        (#"{"a": "open"#, "a", "not closed"),
    ])
    func malformedTextNamesItsMember(_ document: String, _ path: String, _ message: String) {
        #expect {
            try JSONParser.parse(Array(document.utf8))
        } throws: { error in
            guard let error = error as? JSONParseError else { return false }
            return error.path == path && error.message.contains(message)
        }
    }

    /// A name twice is refused however many members the object has: among its first names (compared one
    /// by one), past them (kept in a set), and a name spelled another way that is the same text.
    @Test func aMemberTwiceIsRefusedInObjectsLargeAndSmall() throws {
        let names = (0..<40).map { "m\($0)" }
        func object(_ names: [String]) -> [UInt8] {
            Array(("{" + names.map { "\"\($0)\": 0" }.joined(separator: ", ") + "}").utf8)
        }
        guard case .object(let all) = try JSONParser.parse(object(names)) else {
            Issue.record("not an object")
            return
        }
        #expect(all.count == 40)
        for (first, second) in [(3, 5), (3, 30), (20, 35), (38, 39)] {
            var repeated = names
            repeated[second] = names[first]
            #expect(throws: JSONParseError(path: names[first], message: "the same member twice")) {
                try JSONParser.parse(object(repeated))
            }
        }
        #expect(throws: JSONParseError(path: "é", message: "the same member twice")) {
            try JSONParser.parse(Array(#"{"é": 1, "e\u0301": 2}"#.utf8))
        }
    }

    @Test func bytesThatAreNotUTF8AreRefused() throws {
        for bytes: [UInt8] in [[0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xE2, 0x82], [0xF4, 0x90, 0x80, 0x80]] {
            let document = Array(#"{"name": ""#.utf8) + bytes + Array(#""}"#.utf8)
            #expect(throws: JSONParseError(path: "name", message: "the body is not UTF-8")) { try JSONParser.parse(document) }
        }
        // Escaped and raw forms of the same text decode alike; a pair of escapes is one scalar.
        #expect(try JSONParser.parse(Array(#""\u00e9\ud83d\ude00""#.utf8)) == .string("é😀"))
        #expect(try JSONParser.parse(Array("\"é😀\"".utf8)) == .string("é😀"))
        #expect(try JSONParser.parse(Array(#""\u0000""#.utf8)) == .string("\u{0}"))  // valid JSON; fields refuse it
    }

    @Test func nestingIsBounded() {
        let deep = String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
        #expect(throws: JSONParseError.self) { try JSONParser.parse(Array(deep.utf8)) }
        let allowed = String(repeating: "[", count: JSONParser.maximumDepth) + String(repeating: "]", count: JSONParser.maximumDepth)
        #expect((try? JSONParser.parse(Array(allowed.utf8))) != nil)
    }

    @Test func aBatchStopsAtTheElementPastItsLimitAndSkipsWhatItDoesNotRead() throws {
        let zeros = "{\"events\": [" + Array(repeating: "0", count: 200_000).joined(separator: ",") + "]}"
        #expect {
            try IncomingBatch.parse(Array(zeros.utf8), maximumEvents: 500)
        } throws: { error in
            (error as? JSONParseError)?.isLimit == true
        }
        let five = "{\"events\": [" + Array(repeating: "0", count: 500).joined(separator: ",") + "], \"meta\": {\"x\": [1]}}"
        let batch = try IncomingBatch.parse(Array(five.utf8), maximumEvents: 500)
        #expect(batch.events.count == 500)
        #expect(batch.events.allSatisfy { !$0.isObject })
        // Members no rule reads are skipped, but still checked.
        let event = #"{"events": [{"id": "x", "extra": {"deep": ["\ud800"]}}]}"#
        #expect(throws: JSONParseError(path: "events[0].extra.deep[0]", message: "an unpaired surrogate escape is not Unicode text")) {
            try IncomingBatch.parse(Array(event.utf8), maximumEvents: 500)
        }
        #expect(throws: JSONParseError(path: "events", message: "is required")) {
            try IncomingBatch.parse(Array(#"{"event": []}"#.utf8), maximumEvents: 500)
        }
    }

    @Test(arguments: [("1e19", false), ("412", true), ("412.0", true), ("4.5", false), ("-1", false), ("\"412\"", false)])
    func anEventsBuildIsAnExactInteger(_ literal: String, _ accepted: Bool) throws {
        let body = "{\"events\": [{\"build\": \(literal)}]}"
        let event = try #require(try IncomingBatch.parse(Array(body.utf8), maximumEvents: 500).events.first)
        #expect((event.build == 412) == accepted)
        #expect((event.invalid?.field == .build) == !accepted)
    }
}

@Suite struct TextRulesTests {
    @Test(arguments: ["a\u{0}b", "\u{1}", "\u{1F}", "x\u{FFFE}", "\u{FFFF}"])
    func controlCharactersAndNoncharactersAreRefused(_ text: String) {
        #expect(TextRules.violation(in: text, lineBreaks: true) != nil, "\(text.unicodeScalars.map(\.value))")
    }

    @Test func lineBreaksAreTakenWhereAllowedAndOtherTextIsTaken() {
        #expect(TextRules.violation(in: "line\nbreak\r\tok", lineBreaks: true) == nil)
        #expect(TextRules.violation(in: "line\nbreak", lineBreaks: false) != nil)
        #expect(TextRules.violation(in: "Grüße 😀 \u{7F}", lineBreaks: false) == nil)
    }

    /// A `"` followed by a thousand combining marks is one Character; limits count scalars.
    @Test func lengthsCountScalarsNotGraphemes() throws {
        let heavy = "\"" + String(repeating: "\u{301}", count: 1_000)
        #expect(heavy.count == 1)
        #expect(TextRules.length(heavy) == 1_001)
        let body = JSONValue.object(["id": .string("a"), "name": .string(heavy)])
        #expect(throws: FieldError.self) { try CatalogInput.app(body) }
    }

    @Test(arguments: [
        ("https://apps.apple.com/app/id1", true), ("http://example.com:8080/x?y=1#z", true), ("https://host", true),
        ("itms-apps://apps.apple.com/app/id1", true), ("market://details?id=com.example", true),
        ("https://", false), ("ftp://example.com", false), ("https://exa mple.com", false), ("HTTPS://example.com", false),
        ("https://example.com:123456", false), ("https://example.com/é", false), ("javascript:alert(1)", false),
        ("market:", false), ("https://example.com\u{0}", false),
    ])
    func updateURLsHaveTheDocumentedShape(_ url: String, _ valid: Bool) {
        #expect(CatalogInput.isURL(url) == valid)
    }

    @Test(arguments: [("de_AT", "de-at"), ("EN-us", "en-us"), ("zh_Hant_TW", "zh-hant-tw"), ("", ""), ("Ärger_X", "ärger-x")])
    func localeTagsMatchIgnoringCaseWithUnderscoresAsHyphens(_ tag: String, _ normalized: String) {
        #expect(LocaleTag.normalize(tag) == normalized)
    }

    /// Digits only, in range, and never a trap past `Int` (build numbers, revisions, settings, limits).
    @Test(arguments: [
        ("0", 0), ("007", 7), ("9007199254740991", 9_007_199_254_740_991), ("9007199254740992", nil),
        ("99999999999999999999999", nil), ("", nil), ("-1", nil), ("+1", nil), (" 1", nil), ("1.0", nil),
        ("١٢", nil), ("1e3", nil),
    ] as [(String, Int?)])
    func integersAreASCIIDigitsInRange(_ text: String, _ value: Int?) {
        #expect(TextRules.integer(text, in: 0...9_007_199_254_740_991) == value)
    }
}
