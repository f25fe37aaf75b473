import Foundation
import Testing
import UpshiftTestSupport

/// `scripts/test` runs the suites by the patterns of ``Schedule``, which must say what the tags say.
@Suite struct ScheduleTests {
    /// Every suite of the test targets: its file's name, its name and its traits as written.
    static func declarations() throws -> [(file: String, name: String, traits: String)] {
        try TestEnvironment.swiftFiles(in: ["Tests"]).flatMap { url in
            try String(contentsOf: url, encoding: .utf8).matches(of: #/@Suite(?:\((.*)\))? struct (\w+)/#).map { match in
                (url.lastPathComponent, String(match.2), match.1.map(String.init) ?? "")
            }
        }
    }

    /// Suite name → its traits as written.
    static func suites() throws -> [String: String] {
        Dictionary(try declarations().map { ($0.name, $0.traits) }) { first, _ in first }
    }

    @Test(arguments: [("timed", Schedule.timed), ("alone", Schedule.alone)])
    func eachPatternNamesExactlyTheSuitesOfItsTag(tag: String, pattern: String) throws {
        let suites = try Self.suites()
        #expect(suites.count > 60)
        let tagged = Set(suites.filter { $0.value.contains(".tags(.\(tag))") }.keys)
        let named = Set(pattern.split(separator: "|").map(String.init))
        #expect(!tagged.isEmpty)
        #expect(named == tagged, "tagged but not in the pattern: \(tagged.subtracting(named).sorted()); in the pattern but not tagged: \(named.subtracting(tagged).sorted())")
        // `--filter` matches a part of a test's id: each name may be a part of its own suite's name only.
        for name in named {
            #expect(suites.keys.filter { $0.contains(name) } == [name], "\(name) selects other suites too")
        }
        // A test's id also holds the name of its file: a suite of another schedule in a file whose name
        // holds `name` would run in this group too.
        let files = Dictionary(grouping: try Self.declarations(), by: \.file)
        for (file, declarations) in files where named.contains(where: { file.contains($0) }) {
            let (matching, declared) = (named.filter { file.contains($0) }, declarations.map(\.name))
            #expect(declared.allSatisfy { matching.contains($0) }, "\(file) declares \(declared), which \(matching) select with it")
        }
    }

    @Test func onlyTheSuitesTaggedAloneRunAlone() throws {
        for (name, traits) in try Self.suites() {
            #expect(traits.contains(".tags(.alone)") == traits.contains(".runsAlone"), "\(name): \(traits)")
        }
    }
}
