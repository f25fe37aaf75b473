import Foundation
import Testing
import UpshiftTestSupport

/// `scripts/test` runs the suites by the patterns of ``Schedule``, which must say what the tags say.
@Suite struct ScheduleTests {
    /// Suite name → its traits as written, for every suite of the test targets.
    static func suites() throws -> [String: String] {
        var suites: [String: String] = [:]
        for url in TestEnvironment.swiftFiles(in: ["Tests"]) {
            let text = try String(contentsOf: url, encoding: .utf8)
            for match in text.matches(of: #/@Suite(?:\((.*)\))? struct (\w+)/#) {
                suites[String(match.2)] = match.1.map(String.init) ?? ""
            }
        }
        return suites
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
        for (file, declared) in try Self.suitesByFile() where named.contains(where: { file.contains($0) }) {
            let matching = named.filter { file.contains($0) }
            #expect(declared.allSatisfy { matching.contains($0) }, "\(file) declares \(declared), which \(matching) select with it")
        }
    }

    /// File name → the suites it declares, for every file of the test targets.
    static func suitesByFile() throws -> [String: [String]] {
        var files: [String: [String]] = [:]
        for url in TestEnvironment.swiftFiles(in: ["Tests"]) {
            let text = try String(contentsOf: url, encoding: .utf8)
            files[url.lastPathComponent, default: []] += text.matches(of: #/@Suite(?:\(.*\))? struct (\w+)/#).map { String($0.1) }
        }
        return files
    }

    @Test func onlyTheSuitesTaggedAloneRunAlone() throws {
        for (name, traits) in try Self.suites() {
            #expect(traits.contains(".tags(.alone)") == traits.contains(".runsAlone"), "\(name): \(traits)")
        }
    }
}
