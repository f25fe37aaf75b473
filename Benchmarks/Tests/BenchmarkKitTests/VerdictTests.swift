import Testing

@testable import BenchmarkKit

@Suite struct VerdictTests {
    @Test(arguments: [
        // measured, reference, target, printed
        (24706.6, 125966.7, Targets.ingestBatchAgainstUnnest, "0.20 MISS"),
        (75581.0, 125966.7, Targets.ingestBatchAgainstUnnest, "0.60 PASS"),
        (5668.8, 16108.1, Targets.ingestSingleAgainstPgbench, "0.35 MISS"),
        (16108.1, 16108.1, Targets.ingestSingleAgainstPgbench, "1.00 PASS"),
        (41902.0, 47850.3, Targets.checkAgainstTrivialRoute, "0.88 MISS"),
        (41902.0, 91361.2, Targets.checkAgainstNginx, "0.46 PASS"),
    ])
    func judgesARatio(measured: Double, reference: Double, target: Target, printed: String) {
        #expect(Ratio(measured, over: reference, target: target).description == printed)
    }

    /// The verdict is of the ratio itself, not of its two printed decimals.
    @Test func judgesBeforeRounding() {
        let ratio = Ratio(8996, over: 10000, target: Targets.checkAgainstTrivialRoute)
        #expect(ratio.description == "0.90 MISS")
        #expect(!ratio.isMet)
    }

    /// A reference that measured nothing gives no ratio, and the target is missed.
    @Test func aReferenceOfNothingMisses() {
        #expect(Ratio(100, over: 0, target: Targets.checkAgainstNginx).description == "n/a MISS")
    }

    @Test func judgesBoundsOfTheProjectionsTable() {
        #expect(Verdict.metOrMissed(56414, Targets.catchUp) == "met")
        #expect(Verdict.metOrMissed(49999.9, Targets.catchUp) == "MISSED")
        #expect(Verdict.metOrMissed(1.0, Targets.lag) == "met")
        #expect(Verdict.metOrMissed(1.001, Targets.lag) == "MISSED")
        #expect(Verdict.metOrMissed(nil, Targets.lag) == "MISSED")
        #expect(Verdict.metOrMissed(5320, Targets.otherReports) == "MISSED")
    }
}
