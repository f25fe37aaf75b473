import Foundation
import Testing

@testable import BenchmarkKit

/// The targets every summary judges by are the contract's (docs/BENCHMARKS.md, "Performance targets"):
/// each one's words stand in the row of the contract's table it names, and say the same bound.
@Suite struct TargetsTests {
    /// The contract lives in shared/ beside the checkout (as the test data does: UPSHIFT_TESTDATA).
    static func design() throws -> String {
        let shared: URL
        if let testdata = ProcessInfo.processInfo.environment["UPSHIFT_TESTDATA"], !testdata.isEmpty {
            shared = URL(fileURLWithPath: testdata).deletingLastPathComponent()
        } else {
            let root = URL(fileURLWithPath: #filePath)
                .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            shared = root.deletingLastPathComponent().appendingPathComponent("shared")
        }
        return try String(contentsOf: shared.appendingPathComponent("DESIGN.md"), encoding: .utf8)
    }

    /// The rows of the contract's targets table, under its heading `## 10.`: first cell, second cell.
    static func sectionTen() throws -> [String: String] {
        let lines = try design().split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix("## 10.") }) else {
            Issue.record("DESIGN.md has no section 10")
            return [:]
        }
        var rows: [String: String] = [:]
        for line in lines[(start + 1)...] {
            if line.hasPrefix("## ") { break }
            let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
            if line.hasPrefix("|"), cells.count == 2 { rows[cells[0]] = cells[1] }
        }
        return rows
    }

    /// What words such as "≥ 60%", "p99 ≤ 5 ms" or "≥ the transactions/s" bound: "the ..." of the
    /// reference itself is 1.
    static func bound(of words: String) -> (Target.Comparison, Double)? {
        let comparison: Target.Comparison
        if words.contains("≥") {
            comparison = .atLeast
        } else if words.contains("≤") {
            comparison = .atMost
        } else {
            return nil
        }
        let afterSymbol = words.drop { $0 != "≥" && $0 != "≤" }.dropFirst().drop { $0 == " " }
        let digits = afterSymbol.prefix { $0.isNumber || $0 == "," || $0 == "." }.filter { $0 != "," }
        guard let number = Double(String(digits)) else { return (comparison, 1) }
        return (comparison, afterSymbol.dropFirst(digits.count).hasPrefix("%") ? number / 100 : number)
    }

    @Test(arguments: Targets.all)
    func standsInDesignSectionTen(target: Target) throws {
        let rows = try Self.sectionTen()
        let row = try #require(rows[target.designRow], "DESIGN.md section 10 has no row \(target.designRow)")
        #expect(row.contains(target.designWords), "DESIGN.md: \(target.designRow): \(row)")
        let bound = try #require(Self.bound(of: target.designWords))
        #expect(bound.0 == target.comparison)
        // "≤ 1 s" of a figure judged in milliseconds is 1,000.
        let inSeconds = target.designWords.hasSuffix(" s") && target.unit == .milliseconds
        #expect(bound.1 * (inSeconds ? 1_000 : 1) == target.bound, "\(target.designWords) is not \(target.bound)")
    }

    /// The bash version of the benchmarks judged ingestion with 100 events per request against 0.50.
    @Test func ingestionWithBatchesMustReachSixtyPercent() {
        #expect(Targets.ingestBatchAgainstUnnest.bound == 0.60)
    }

    /// Every figure the contract's table bounds has a target.
    @Test func everyRowOfSectionTenHasATarget() throws {
        let named = Set(Targets.all.map(\.designRow))
        for (row, words) in try Self.sectionTen() where row != "what" && !row.hasPrefix("---") {
            #expect(named.contains(row), "no target for \(row): \(words)")
        }
    }

    @Test func printsItsBound() {
        #expect(Targets.ingestBatchAgainstUnnest.text == ">= 0.60")
        #expect(Targets.ingestSingleAgainstPgbench.text == ">= 1.00")
        #expect(Targets.checkPacedLatency.text == "p99 <= 5 ms")
        #expect(Targets.checkPacedLatency.boundText == "<= 5 ms")
        #expect(Targets.catchUp.text == ">= 50,000 events/s")
        #expect(Targets.lag.text == "p99 <= 1 s")
        #expect(Targets.adoptionReport.text == "p95 <= 50 ms")
        #expect(Targets.otherReports.text == "p95 <= 100 ms")
        #expect(Targets.memory.text == "<= 200 MB")
    }
}
