import Foundation
import Testing
import UpshiftCore

@testable import UpshiftServer

/// The SVG chart builders of the dashboard: geometry checked on the values, and what the SVG says.
@Suite struct ChartTests {
    static func day(_ day: String, _ versions: [(String, Int)]) -> AdoptionReport.Day {
        AdoptionReport.Day(
            day: day, activeInstalls: versions.reduce(0) { $0 + $1.1 },
            versions: versions.map { AdoptionReport.VersionCount(version: $0.0, installs: $0.1) })
    }

    /// Every `<rect …>` of an SVG, as its attributes.
    static func rects(_ svg: HTML) -> [[String: String]] {
        svg.text.components(separatedBy: "<rect ").dropFirst().map { part in
            let tag = part.prefix { $0 != ">" }
            var attributes: [String: String] = [:]
            let regex = /([a-z-]+)="([^"]*)"/
            for match in tag.matches(of: regex) { attributes[String(match.1)] = String(match.2) }
            return attributes
        }
    }

    @Test func columnsStackToTheWholeDayWithTheNewestVersionOnTop() throws {
        let chart = AdoptionChart(days: [
            Self.day("2026-05-01", [("1.0", 30), ("1.10", 50), ("1.9", 20)]),
            Self.day("2026-05-02", [("1.10", 90), ("1.0", 10)]),
        ])
        // Version order, not text order: 1.9 below 1.10.
        #expect(chart.series.map(\.label) == ["1.0", "1.9", "1.10"])
        #expect(chart.legend.map(\.label) == ["1.10", "1.9", "1.0"])
        let first = chart.columns[0]
        #expect(first.activeInstalls == 100)
        #expect(first.segments.map(\.from) == [0, 0.3, 0.5])
        #expect(first.segments.map(\.to) == [0.3, 0.5, 1])
        #expect(chart.columns[1].segments.last?.to == 1)

        let frame = chart.frame
        let rects = Self.rects(chart.svg)
        #expect(rects.count == 5)  // three segments, then two
        // The newest version's segment is the topmost of its column and reaches the top of the plot.
        let newest = try #require(rects.first { $0["class"] == "s0" })
        #expect(Double(newest["y"]!)! == frame.top)
        let heights = rects.prefix(3).map { Double($0["height"]!)! }
        #expect(abs(heights.reduce(0, +) - frame.plotHeight) < 0.5)
    }

    @Test func axesLabelSharesAndTheFirstAndLastDay() {
        let days = (1...30).map { Self.day(String(format: "2026-06-%02d", $0), [("2.0", $0), ("1.0", 31 - $0)]) }
        let svg = AdoptionChart(days: days).svg.text
        for label in ["0%", "25%", "50%", "75%", "100%", "2026-06-01", "2026-06-30"] {
            #expect(svg.contains(">\(label)</text>"), "missing axis label \(label)")
        }
        #expect(tickIndexes(count: 30) == [0, 6, 12, 17, 23, 29])
        #expect(svg.contains("role=\"img\"") && svg.contains("<title>Share of daily active installs by version</title>"))
    }

    @Test func anEmptyRangeSaysSoInsteadOfDrawing() {
        let chart = AdoptionChart(days: [Self.day("2026-05-01", []), Self.day("2026-05-02", [])])
        #expect(chart.isEmpty)
        #expect(Self.rects(chart.svg).isEmpty)
        #expect(chart.svg.text.contains("No active installs in this range"))
        #expect(AdoptionChart(days: []).svg.text.contains("No active installs"))
        #expect(CountChart(title: "Active", labels: [], values: []).svg.text.contains("No data"))
        #expect(CurveChart(points: []).svg.text.contains("No cohort yet"))
    }

    @Test func aSingleDayFillsThePlotWidth() throws {
        let chart = AdoptionChart(days: [Self.day("2026-05-01", [("1.0", 3), ("2.0", 1)])])
        let rects = Self.rects(chart.svg)
        #expect(rects.count == 2)
        let width = try #require(Double(rects[0]["width"]!))
        #expect(width >= chart.frame.plotWidth - 1)
        #expect(chart.svg.text.contains(">2026-05-01</text>"))

        let curve = CurveChart(points: [ReleaseReport.CurvePoint(day: 0, updated: 1, share: 0.25)])
        #expect(curve.svg.text.contains("<circle"))
        #expect(curve.lastDay == 1)
    }

    @Test func twoHundredVersionsKeepTheNewestAndGroupTheRestAsOlder() {
        let versions = (1...200).map { ("1.\($0)", $0) }
        let chart = AdoptionChart(days: [Self.day("2026-05-01", versions)])
        #expect(chart.series.count == AdoptionChart.defaultMaximumSeries)
        #expect(chart.series.first?.label == "older")
        #expect(chart.series.dropFirst().map(\.label) == (194...200).map { "1.\($0)" })
        let column = chart.columns[0]
        let total = (1...200).reduce(0, +)
        #expect(column.activeInstalls == total)
        #expect(column.segments.first?.installs == (1...193).reduce(0, +))
        #expect(column.segments.last?.to == 1)
        #expect(Self.rects(chart.svg).count == 8)
    }

    @Test func countAxisRoundsUpAndCurveMarksTheDaysThatMatter() {
        #expect(niceCeiling(0) == 1)
        #expect(niceCeiling(7) == 10)
        #expect(niceCeiling(312) == 500)
        #expect(niceCeiling(1_000) == 1_000)
        #expect(niceCeiling(1_001) == 2_000)
        let bars = CountChart(title: "Active", labels: ["a", "b"], values: [312, 100]).svg.text
        #expect(bars.contains(">500</text>") && bars.contains(">250</text>"))

        let points = (0...40).map { ReleaseReport.CurvePoint(day: $0, updated: $0, share: Double($0) / 40) }
        let curve = CurveChart(points: points).svg.text
        #expect(curve.contains(">day 1</text>") && curve.contains(">day 7</text>") && curve.contains(">day 30</text>"))
        #expect(curve.components(separatedBy: "<circle").count - 1 == 3)
    }

    @Test func textIsEscaped() {
        let chart = AdoptionChart(days: [Self.day("2026-05-01", [("<b>1.0", 3)])])
        #expect(!chart.svg.text.contains("<b>"))
        #expect(chart.svg.text.contains("&lt;b&gt;1.0"))
        let html: HTML = "<p>\("\"quoted\" & <tag>")</p>"
        #expect(html.text == "<p>&quot;quoted&quot; &amp; &lt;tag&gt;</p>")
    }
}
