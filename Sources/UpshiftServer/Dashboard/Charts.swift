import Foundation
import UpshiftCore

/// The dashboard's charts, drawn as SVG by Upshift itself (no scripts, fonts or CDNs). Each chart is a
/// value holding its geometry, which tests check, and renders to an `<svg>` with a title and description;
/// the page puts a table of the same numbers behind a disclosure next to it.
///
/// Colours come from the page's stylesheet through class names (`s0`…`s7`, `older`, `line`), so one
/// chart reads in light and dark mode.
struct ChartFrame: Sendable, Equatable {
    var width = 720.0
    var height = 260.0
    var left = 56.0
    var right = 16.0
    var top = 12.0
    var bottom = 40.0

    var plotWidth: Double { width - left - right }
    var plotHeight: Double { height - top - bottom }
    /// The y coordinate of a value in 0…1 of the plot's height.
    func y(_ fraction: Double) -> Double { top + plotHeight * (1 - fraction) }
}

/// Tick labels along an axis: at most `count`, first and last always, evenly spaced between.
func tickIndexes(count items: Int, maximum: Int = 6) -> [Int] {
    guard items > 0 else { return [] }
    guard items > maximum else { return Array(0..<items) }
    return (0..<maximum).map { Int((Double($0) * Double(items - 1) / Double(maximum - 1)).rounded()) }
}

/// A round upper bound for a count axis: 1, 2 or 5 times a power of ten, at least `value`.
func niceCeiling(_ value: Int) -> Int {
    guard value > 0 else { return 1 }
    var power = 1
    while power * 10 <= value { power *= 10 }
    for step in [1, 2, 5, 10] where step * power >= value { return step * power }
    return 10 * power
}

private func format(_ value: Double) -> String { String(format: "%.1f", value) }

private func chartSVG(_ frame: ChartFrame, title: String, description: String, body: HTML) -> HTML {
    """
    <svg class="chart" viewBox="0 0 \(Int(frame.width)) \(Int(frame.height))" role="img" aria-label="\(title)" \
    preserveAspectRatio="xMidYMid meet" xmlns="http://www.w3.org/2000/svg"><title>\(title)</title><desc>\(description)</desc>\(body)</svg>
    """
}

/// Horizontal grid lines with labels at the given fractions of the plot height.
private func yAxis(_ frame: ChartFrame, ticks: [(fraction: Double, label: String)]) -> HTML {
    ticks.map { tick in
        let y = format(frame.y(tick.fraction))
        return """
            <line class="grid" x1="\(format(frame.left))" x2="\(format(frame.width - frame.right))" y1="\(y)" y2="\(y)"/>\
            <text class="axis" x="\(format(frame.left - 6))" y="\(y)" text-anchor="end" dominant-baseline="middle">\(tick.label)</text>
            """
    }.joined()
}

private func xAxis(_ frame: ChartFrame, labels: [(x: Double, label: String)]) -> [HTML] {
    let baseline = format(frame.y(0))
    let line: HTML = """
        <line class="axisline" x1="\(format(frame.left))" x2="\(format(frame.width - frame.right))" y1="\(baseline)" y2="\(baseline)"/>
        """
    let texts = labels.enumerated().map { index, label -> HTML in
        let anchor = labels.count == 1 ? "middle" : index == 0 ? "start" : index == labels.count - 1 ? "end" : "middle"
        return """
            <text class="axis" x="\(format(label.x))" y="\(format(frame.height - frame.bottom + 18))" text-anchor="\(anchor)">\(label.label)</text>
            """
    }
    return [line] + texts
}

private func emptyMessage(_ frame: ChartFrame, _ message: String) -> HTML {
    """
    <text class="empty" x="\(format(frame.left + frame.plotWidth / 2))" y="\(format(frame.top + frame.plotHeight / 2))" \
    text-anchor="middle">\(message)</text>
    """
}

/// Share of the day's active installs per version, one stacked column a day: the oldest at the bottom,
/// the newest on top, and beyond `maximumSeries` the oldest versions grouped as "older".
struct AdoptionChart: Sendable {
    struct Series: Sendable, Equatable {
        var label: String
        /// `s0`… for versions (s0 the newest), `older` for the group.
        var style: String
    }

    struct Segment: Sendable, Equatable {
        var series: Int
        var installs: Int
        /// Shares of the day's active installs, stacked: the segment spans `from`…`to`.
        var from: Double
        var to: Double
    }

    struct Column: Sendable, Equatable {
        var day: String
        var activeInstalls: Int
        var segments: [Segment]
    }

    static let defaultMaximumSeries = 8

    let frame: ChartFrame
    /// Bottom to top.
    let series: [Series]
    let columns: [Column]

    init(days: [AdoptionReport.Day], maximumSeries: Int = defaultMaximumSeries, frame: ChartFrame = ChartFrame()) {
        self.frame = frame
        // Versions in version order (a spelling that does not parse sorts lowest, with the oldest).
        let spellings = Set(days.flatMap { $0.versions.map(\.version) })
        let ordered = spellings.sorted { lhs, rhs in
            switch (Version(lhs), Version(rhs)) {
            case let (left?, right?): left < right || (left == right && lhs < rhs)
            case (nil, _?): true
            case (_?, nil): false
            case (nil, nil): lhs < rhs
            }
        }
        let keep = ordered.count > maximumSeries ? max(1, maximumSeries - 1) : ordered.count
        let kept = Array(ordered.suffix(keep))
        let grouped = ordered.count > kept.count
        var series: [Series] = grouped ? [Series(label: "older", style: "older")] : []
        series += kept.enumerated().map { index, version in Series(label: version, style: "s\(kept.count - 1 - index)") }
        self.series = series
        var index: [String: Int] = [:]
        for (position, version) in kept.enumerated() { index[version] = position + (grouped ? 1 : 0) }

        columns = days.map { day in
            var installs = [Int](repeating: 0, count: series.count)
            for cell in day.versions { installs[index[cell.version] ?? 0] += cell.installs }
            let total = installs.reduce(0, +)
            var segments: [Segment] = []
            var running = 0
            for (position, count) in installs.enumerated() where count > 0 {
                segments.append(
                    Segment(
                        series: position, installs: count, from: Double(running) / Double(total),
                        to: Double(running + count) / Double(total)))
                running += count
            }
            return Column(day: day.day, activeInstalls: total, segments: segments)
        }
    }

    var isEmpty: Bool { columns.allSatisfy { $0.activeInstalls == 0 } }

    /// The legend, newest first (as the stack reads from the top).
    var legend: [Series] { series.reversed() }

    var svg: HTML {
        let title = "Share of daily active installs by version"
        guard !isEmpty else {
            return chartSVG(frame, title: title, description: "No installs were active in this range.", body: emptyMessage(frame, "No active installs in this range"))
        }
        let width = frame.plotWidth / Double(columns.count)
        // A hair of overlap so neighbouring columns do not show seams.
        let drawn = max(width - (width > 6 ? 1 : 0), 0.5)
        var parts: [HTML] = [
            yAxis(frame, ticks: [0, 0.25, 0.5, 0.75, 1].map { ($0, Figures.percent($0)) })
        ]
        for (position, column) in columns.enumerated() {
            let x = frame.left + Double(position) * width
            for segment in column.segments {
                let top = frame.y(segment.to)
                let height = frame.y(segment.from) - top
                let item = series[segment.series]
                parts.append(
                    """
                    <rect class="\(item.style)" x="\(format(x))" y="\(format(top))" width="\(format(drawn))" height="\(format(height))">\
                    <title>\(column.day): \(item.label) \(Figures.percent(segment.to - segment.from)) (\(Figures.count(segment.installs)) installs)</title></rect>
                    """)
            }
        }
        parts += xAxis(
            frame,
            labels: tickIndexes(count: columns.count).map { index in
                (frame.left + (Double(index) + 0.5) * width, columns[index].day)
            })
        let newest = series.last?.label ?? ""
        return chartSVG(
            frame, title: title,
            description: "\(columns.count) days from \(columns.first?.day ?? "") to \(columns.last?.day ?? ""); newest version \(newest) on top.",
            body: parts.joined())
    }
}

/// One count per column (active installs per day).
struct CountChart: Sendable {
    let frame: ChartFrame
    let title: String
    let labels: [String]
    let values: [Int]

    init(title: String, labels: [String], values: [Int], frame: ChartFrame = ChartFrame(height: 180)) {
        self.title = title
        self.labels = labels
        self.values = values
        self.frame = frame
    }

    /// The top of the axis.
    var ceiling: Int { niceCeiling(values.max() ?? 0) }

    var svg: HTML {
        guard values.contains(where: { $0 > 0 }) else {
            return svgFrame(description: "No data in this range.", body: emptyMessage(frame, "No data in this range"))
        }
        let width = frame.plotWidth / Double(values.count)
        let drawn = max(width - (width > 6 ? 1 : 0), 0.5)
        var parts: [HTML] = [
            yAxis(frame, ticks: [0, 0.5, 1].map { ($0, Figures.count(Int(Double(ceiling) * $0))) })
        ]
        for (position, value) in values.enumerated() where value > 0 {
            let top = frame.y(Double(value) / Double(ceiling))
            parts.append(
                """
                <rect class="s0" x="\(format(frame.left + Double(position) * width))" y="\(format(top))" \
                width="\(format(drawn))" height="\(format(frame.y(0) - top))"><title>\(labels[position]): \(Figures.count(value))</title></rect>
                """)
        }
        parts += xAxis(
            frame, labels: tickIndexes(count: values.count).map { (frame.left + (Double($0) + 0.5) * width, labels[$0]) })
        return svgFrame(description: "\(values.count) values, highest \(Figures.count(values.max() ?? 0)).", body: parts.joined())
    }

    private func svgFrame(description: String, body: HTML) -> HTML {
        chartSVG(frame, title: title, description: description, body: body)
    }
}

/// A release's time-to-update: the share of the cohort updated by day since the release, with the
/// days 1, 7 and 30 marked.
struct CurveChart: Sendable {
    let frame: ChartFrame
    let points: [ReleaseReport.CurvePoint]

    init(points: [ReleaseReport.CurvePoint], frame: ChartFrame = ChartFrame()) {
        self.points = points
        self.frame = frame
    }

    /// The last day on the x axis (at least 1, so one point still has room).
    var lastDay: Int { max(points.last?.day ?? 0, 1) }

    func x(_ day: Int) -> Double { frame.left + frame.plotWidth * Double(day) / Double(lastDay) }

    var svg: HTML {
        let title = "Share of the cohort updated, by day since the release"
        guard !points.isEmpty else {
            return chartSVG(
                frame, title: title, description: "No cohort yet.", body: emptyMessage(frame, "No cohort yet"))
        }
        var parts: [HTML] = [yAxis(frame, ticks: [0, 0.25, 0.5, 0.75, 1].map { ($0, Figures.percent($0)) })]
        for mark in [1, 7, 30] where mark <= lastDay {
            let x = format(x(mark))
            parts.append(
                """
                <line class="mark" x1="\(x)" x2="\(x)" y1="\(format(frame.top))" y2="\(format(frame.y(0)))"/>\
                <text class="axis" x="\(x)" y="\(format(frame.top + 10))" text-anchor="middle">day \(mark)</text>
                """)
        }
        // Steps: the share holds through a day and rises at the next.
        var path = "M\(format(x(0))),\(format(frame.y(points[0].share)))"
        for point in points.dropFirst() {
            path += " H\(format(x(point.day))) V\(format(frame.y(point.share)))"
        }
        parts.append("<path class=\"line\" d=\"\(path)\"/>")
        for point in points where [1, 7, 30].contains(point.day) || points.count == 1 {
            parts.append(
                """
                <circle class="dot" cx="\(format(x(point.day)))" cy="\(format(frame.y(point.share)))" r="3.5"><title>day \(point.day): \
                \(Figures.percent(point.share)) (\(Figures.count(point.updated)))</title></circle>
                """)
        }
        parts += xAxis(
            frame,
            labels: tickIndexes(count: lastDay + 1).map { (x($0), "day \($0)") })
        let final = points.last!
        return chartSVG(
            frame, title: title,
            description: "\(Figures.percent(final.share)) of the cohort updated by day \(final.day).", body: parts.joined())
    }
}
