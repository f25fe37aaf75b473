import Testing

@testable import UpshiftStore

@Suite struct BackfillTests {
    /// Writes are sized by how long the last ones took (`WriteSizer`), for a rebuild's catch-up and for
    /// the runner's batches.
    @Test func aWriteTargetSizesTheNextWriteByTheSlowestRecentRate() {
        let target = Duration.milliseconds(250)
        func after(_ writes: [(rows: Int, milliseconds: Int)], maximum: Int = 20_000) -> Int {
            var sizer = WriteSizer(maximum: maximum)
            for write in writes { sizer.record(rows: write.rows, took: .milliseconds(write.milliseconds), target: target) }
            return sizer.rows
        }
        #expect(WriteSizer(maximum: 20_000).rows == 1_000)
        #expect(WriteSizer(maximum: 50).rows == 50)
        // 20,000 rows in 1.2 s (a loaded machine): a quarter-second write is about 4,166 rows.
        #expect(after([(20_000, 1_200)]) == 4_166)
        // A write at the target keeps its size; one twice as long halves it.
        #expect(after([(4_000, 250)]) == 4_000)
        #expect(after([(4_000, 500)]) == 2_000)
        // A fast write at most doubles the next, and never beyond the maximum.
        #expect(after([(1_000, 10)]) == 2_000)
        #expect(after([(15_000, 10)]) == 20_000)
        #expect(after([(1_000, 0)]) == 2_000)
        // A very slow write still leaves 100 rows to the next (or the maximum, when it is lower).
        #expect(after([(1_000, 60_000)]) == 100)
        #expect(after([(50, 60_000)], maximum: 50) == 50)
        // One quick write after a slow one does not double the next: the slowest of the last eight rules.
        #expect(after([(4_000, 500), (2_000, 50)]) == 2_000)
        // Eight writes later the slow one is forgotten.
        let quick = Array(repeating: (rows: 4_000, milliseconds: 125), count: 8)
        #expect(after([(4_000, 1_000)] + quick) == 8_000)
        #expect(after([(4_000, 1_000)] + quick.dropLast()) == 1_000)
    }
}
