import Testing

@testable import BenchmarkKit

@Suite struct PrometheusTextTests {
    @Test func sumsAMetricOverItsLabels() throws {
        let metrics = PrometheusText(try Recorded.text("check/d-metrics.txt"))
        #expect(metrics.printed("upshift_check_observations_total") == "164952")
        #expect(metrics.printed("upshift_check_observations_dropped_total") == "0")
        #expect(metrics.sum("upshift_events_total") == 0)
        #expect(PrometheusText(try Recorded.text("check/e-metrics.txt")).printed("upshift_check_cache_bytes") == "66830639")
    }

    @Test func labelledSamplesAddUpAndOtherMetricsDoNot() {
        let metrics = PrometheusText("""
            # TYPE upshift_events_total counter
            upshift_events_total{status="accepted"} 40
            upshift_events_total{status="duplicate"} 2
            upshift_events_total_other 1000
            """)
        #expect(metrics.sum("upshift_events_total") == 42)
    }

    /// A metric the server does not export is "missing", and a must that reads it fails.
    @Test func aMissingMetricIsSaidSo() {
        #expect(PrometheusText("# TYPE x counter\nx 1\n").printed("upshift_check_observations_dropped_total") == "missing")
    }
}
