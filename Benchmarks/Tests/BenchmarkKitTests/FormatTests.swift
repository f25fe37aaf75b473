import Foundation
import Testing

@testable import BenchmarkKit

@Suite struct FormatTests {
    @Test func roundsAsPrintfDoes() {
        #expect(Format.fixed(125966.66666, 1) == "125966.7")
        #expect(Format.fixed(0.125, 2) == "0.12")  // the double below 0.125, as printf rounds it
        #expect(Format.fixed(2.5, 0) == "2")
        #expect(Format.percent(0.874) == "87%")
    }

    @Test(arguments: [(0, "0"), (999, "999"), (1000, "1,000"), (10_000_011, "10,000,011"), (-1234, "-1,234")])
    func groupsThousands(value: Int, printed: String) {
        #expect(Format.grouped(value) == printed)
    }

    @Test func groupsARoundedNumber() {
        #expect(Format.grouped(56413.6) == "56,414")
    }

    @Test func writesUTCTimes() {
        let date = Date(timeIntervalSince1970: 1_795_538_972)  // 2026-11-24 16:49:32 UTC
        #expect(Format.utcStamp(date) == "2026-11-24 16:49:32 UTC")
        #expect(Format.iso8601(date) == "2026-11-24T16:49:32Z")
        #expect(Format.day(date) == "2026-11-24")
        #expect(Format.clock(date) == "16:49:32")
        #expect(Format.folderStamp(date) == "20261124-164932")
    }

    @Test func padsCellsWithoutCuttingThem() {
        let table = TextTable([.left(6), .right(5), .left(0)])
        #expect(table.row(["case", "1.5", ""]) == "case     1.5 ")
        #expect(table.row(["a long case", "123456", "x"]) == "a long case 123456 x")
    }
}
