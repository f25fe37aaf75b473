import Foundation
import Testing
import UpshiftCore
import UpshiftTestData

/// Every case of `../shared/testdata/versions.json`, as it is (docs/ARCHITECTURE.md, "Versions").
@Suite struct VersionTests {
    struct Cases: Decodable {
        var compare: [[CompareValue]]
        var invalid: [String]
        var updateType: [[String]]
    }

    enum CompareValue: Decodable {
        case text(String), sign(Int)
        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let sign = try? container.decode(Int.self) { self = .sign(sign) } else { self = .text(try container.decode(String.self)) }
        }
        var text: String? { if case .text(let t) = self { t } else { nil } }
        var sign: Int? { if case .sign(let s) = self { s } else { nil } }
    }

    static func cases() throws -> Cases {
        try JSONDecoder().decode(Cases.self, from: try SharedTestData.file("versions.json"))
    }

    @Test func sharedFileHasCases() throws {
        let cases = try Self.cases()
        #expect(cases.compare.count >= 20)
        #expect(cases.invalid.count >= 13)
        #expect(cases.updateType.count >= 5)
    }

    @Test func compareCases() throws {
        for row in try Self.cases().compare {
            let a = try #require(row[0].text.flatMap(Version.init), "\(row)")
            let b = try #require(row[1].text.flatMap(Version.init), "\(row)")
            let sign = try #require(row[2].sign)
            let actual = a < b ? -1 : (a == b ? 0 : 1)
            #expect(actual == sign, "\(a) vs \(b)")
            // Ordering is antisymmetric and equality agrees with hashing.
            #expect((b < a ? -1 : (a == b ? 0 : 1)) == -sign, "\(b) vs \(a)")
            if sign == 0 { #expect(a.hashValue == b.hashValue) }
        }
    }

    @Test func invalidCases() throws {
        for text in try Self.cases().invalid {
            #expect(Version(text) == nil, "\(text) must be invalid")
        }
    }

    @Test func updateTypeCases() throws {
        for row in try Self.cases().updateType {
            let from = try #require(Version(row[0]))
            let to = try #require(Version(row[1]))
            #expect(Version.updateType(from: from, to: to)?.rawValue == row[2], "\(row)")
        }
    }

    @Test(arguments: ["٣.٤", "1.2.3.4.5.6", "01.002", "1.0.0-rc.1+build.5", "999999999"])
    func edgeCasesOfTheRules(_ text: String) {
        switch text {
        case "٣.٤": #expect(Version(text) == nil)  // non-ASCII digits
        case "1.2.3.4.5.6": #expect(Version(text) != nil)  // six components is the limit
        case "01.002": #expect(Version(text) == Version("1.2"))  // leading zeros ignored
        case "1.0.0-rc.1+build.5": #expect(Version(text)! < Version("1.0.0")!)
        default: #expect(Version(text)?.components == [999_999_999])
        }
    }

    @Test func equalNumericPartsHaveNoUpdateType() {
        #expect(Version.updateType(from: Version("2.0.0-beta.1")!, to: Version("2.0.0")!) == nil)
    }

    /// The numeric part read in one pass accepts exactly what the rules of docs/ARCHITECTURE.md ("Versions") say, written
    /// here the plain way (split at dots, each part checked), over random texts of digits and dots near the limits.
    @Test func numericPartsFollowTheRulesOnRandomTexts() {
        func byTheRules(_ text: String) -> [Int]? {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard (1...6).contains(parts.count) else { return nil }
            var numbers: [Int] = []
            for part in parts {
                guard (1...12).contains(part.utf8.count), part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                    let value = Int(part), value <= 999_999_999
                else { return nil }
                numbers.append(value)
            }
            while numbers.count > 1, numbers.last == 0 { numbers.removeLast() }
            return numbers == [0] ? [] : numbers
        }
        var random = SplitMix64(seed: 20_261_127)
        // Digits (9s to reach the largest component), dots (empty parts, too many parts) and a letter.
        let alphabet = Array("0000000009999999991..........x")
        for _ in 0..<50_000 {
            let text = String((0..<random.int(0...24)).map { _ in alphabet[random.int(0...(alphabet.count - 1))] })
            #expect(Version(text)?.components == byTheRules(text), "\(text)")
        }
    }
}
