import Foundation
import Testing
import UpshiftCore

/// A platform name is the one rule of ``Platform``: every route, form, command and event that takes one
/// refuses the same names with the same error.
@Suite struct PlatformTests {
    @Test(arguments: ["ios", "android", "macos", "tvos", "visionos", "a", "x1", "my_os", "web-2", String(repeating: "a", count: 32)])
    func aPlatformNameIsAccepted(_ name: String) throws {
        #expect(try Platform(name).rawValue == name)
    }

    /// Capitals are ASCII: the Kelvin sign lowercases to an ASCII `k` in Unicode, yet `\u{212A}os` is no
    /// spelling of a platform (a dotted capital I and 33 capitals are refused as well).
    @Test(arguments: [
        "", "1os", "_ios", "-ios", "i os", "ios!", "íos", "ios\u{0}", "IOS!", String(repeating: "a", count: 33),
        "\u{212A}os", "\u{130}os", String(repeating: "A", count: 33),
    ])
    func aNameThatBreaksTheRuleIsTheOneFieldError(_ name: String) {
        #expect(Platform(validating: name) == nil)
        #expect(throws: FieldError("platform", Platform.rule)) { try Platform(name) }
        #expect(throws: FieldError("updateURL.\(name)", Platform.rule)) { try Platform(name, field: "updateURL.\(name)") }
    }

    /// A name wrong only in its capitals is told how it is spelled.
    @Test(arguments: [("IOS", "ios"), ("iOS", "ios"), ("macOS", "macos"), ("Android", "android"), ("Web-2", "web-2")])
    func aNameWrongOnlyInItsCapitalsIsToldItsLowercaseSpelling(_ name: String, _ lowercase: String) {
        #expect(Platform(validating: name) == nil)
        #expect(throws: FieldError("platform", "a platform is lowercase, for example \(lowercase)")) { try Platform(name) }
        #expect(Platform.problem(with: name) == "a platform is lowercase, for example \(lowercase)")
    }

    @Test func aMapByPlatformIsAJSONObjectOfNamesAndABadNameFailsToDecode() throws {
        let map: [Platform: String] = ["ios": "https://apps.apple.com/app/id1", "android": "https://play.google.com"]
        let data = try JSONEncoder().encode(map)
        let object = try #require(try JSONSerialization.jsonObject(with: data) as? [String: String])
        #expect(object == ["ios": "https://apps.apple.com/app/id1", "android": "https://play.google.com"])
        #expect(try JSONDecoder().decode([Platform: String].self, from: data) == map)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Platform: String].self, from: Data(#"{"IOS":"x"}"#.utf8)) }
        #expect(throws: DecodingError.self) { try JSONDecoder().decode([Platform].self, from: Data(#"["ios","Mac OS"]"#.utf8)) }
    }
}
