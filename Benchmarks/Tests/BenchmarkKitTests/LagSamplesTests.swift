import Testing

@testable import BenchmarkKit

@Suite struct LagSamplesTests {
    /// The live run of Recorded/projections: wrk ran from about 1795539908.62 to 1795539918.67; the
    /// sampler started a second before.
    static let liveStart = 1_795_539_908.62
    static let liveEnd = 1_795_539_918.67

    @Test func readsTheSamplerOutput() throws {
        let samples = LagSample.parse(try Recorded.text("projections/lag-samples.txt"))
        #expect(samples.count == 56)
        #expect(samples[5] == LagSample(
            epoch: 1_795_539_908.651, maximum: 0.019,
            lags: ["adoption": 0.019, "install_state": 0.019, "prompt_funnel": 0.019, "release_cohorts": 0.019]))
    }

    @Test func summarisesTheSamplesTakenWhileWrkRan() throws {
        let samples = LagSample.parse(try Recorded.text("projections/lag-samples.txt"))
        let lag = LagSummary(samples, from: Self.liveStart, to: Self.liveEnd)
        #expect(lag.count == 51)
        #expect(lag.p50 == 0.022)
        #expect(lag.p99 == 0.086)
        #expect(lag.maximum == 0.086)
        #expect(lag.periodMilliseconds.map { Format.fixed($0, 0) } == "197")
        #expect(lag.projections.map(\.name) == ["adoption", "install_state", "prompt_funnel", "release_cohorts"])
        #expect(lag.projections[0] == LagSummary.Projection(name: "adoption", p50: 0.010, p99: 0.086, maximum: 0.086))
    }

    @Test func hasNoFiguresWithoutSamples() {
        let lag = LagSummary([], from: 0, to: 10)
        #expect(lag.count == 0)
        #expect(lag.p99 == nil)
        #expect(lag.periodMilliseconds == nil)
        #expect(Verdict.metOrMissed(lag.p99, Targets.lag) == "MISSED")
    }

    /// Nearest rank: the smallest value with at least p% of the values at or below it.
    @Test func takesPercentilesByNearestRank() {
        let ranks = NearestRank((1...200).map(Double.init).reversed())
        #expect(ranks.percentile(50) == 100)
        #expect(ranks.percentile(99) == 198)
        #expect(ranks.maximum == 200)
        #expect(NearestRank([7]).percentile(99) == 7)
        #expect(NearestRank([1, 2, 3]).percentile(50) == 2)
        #expect(NearestRank([]).percentile(50) == nil)
    }

    @Test func takesTheRSSPeakOfAWindow() throws {
        let rss = RSSSamples(parsing: try Recorded.text("projections/rss.txt"))
        #expect(rss.samples.count == 30)
        #expect(rss.peakMiB(from: 1_795_539_890.0, to: 1_795_539_893.8) == 48)
        #expect(rss.peakMiB(from: Self.liveStart, to: Self.liveEnd) == 56)
        #expect(rss.peakMiB() == 56)
        #expect(rss.peakMiB(from: 0, to: 1) == nil)
        #expect(RSSSamples.Sample(epoch: 1.5, kilobytes: 2048).line == "1.500 2048")
    }

    @Test func addsUpTheBulkLoadsOutputs() throws {
        let outputs = [try Recorded.text("projections/load-0.txt"), try Recorded.text("projections/load-1.txt")]
        #expect(BulkLoadOutput.events(outputs) == 200_000)
    }
}
