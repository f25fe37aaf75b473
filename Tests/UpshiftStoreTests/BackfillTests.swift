import Testing

@testable import UpshiftStore

@Suite struct BackfillTests {
    /// A rebuild's writes are sized by how long the last one took (`Backfill.Options.writeTarget`).
    @Test func aWriteTargetSizesTheNextWriteByTheLastOnesDuration() {
        let target = Duration.milliseconds(250)
        func next(_ rows: Int, took milliseconds: Int, maximum: Int = 20_000) -> Int {
            Backfill.nextRowsPerWrite(after: rows, took: .milliseconds(milliseconds), target: target, maximum: maximum)
        }
        // 20,000 rows in 1.2 s (a loaded machine): a quarter-second write is about 4,166 rows.
        #expect(next(20_000, took: 1_200) == 4_166)
        // A write at the target keeps its size; one twice as long halves it.
        #expect(next(4_000, took: 250) == 4_000)
        #expect(next(4_000, took: 500) == 2_000)
        // A fast write at most doubles the next, and never beyond the maximum.
        #expect(next(1_000, took: 10) == 2_000)
        #expect(next(15_000, took: 10) == 20_000)
        #expect(next(1_000, took: 0) == 2_000)
        // A very slow write still leaves 100 rows to the next (or the maximum, when it is lower).
        #expect(next(1_000, took: 60_000) == 100)
        #expect(next(50, took: 60_000, maximum: 50) == 50)
    }
}
