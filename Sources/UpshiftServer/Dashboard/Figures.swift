import Foundation
import UpshiftCore

/// Numbers as the dashboard shows them.
enum Figures {
    static func count(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var grouped = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { grouped += "," }
            grouped.append(digit)
        }
        return value < 0 ? "-" + grouped : grouped
    }

    static func percent(_ share: Double?) -> String {
        guard let share else { return "–" }
        let value = share * 100
        return value == value.rounded() ? "\(Int(value))%" : String(format: "%.1f%%", value)
    }

    static func duration(seconds: Double?) -> String {
        guard let seconds else { return "–" }
        if seconds < 3_600 { return "\(Int((seconds / 60).rounded())) min" }
        if seconds < 2 * 86_400 { return String(format: "%.1f h", seconds / 3_600) }
        return String(format: "%.1f days", seconds / 86_400)
    }

    /// A moment to the minute, in UTC: `2026-06-02 00:00 UTC`.
    static func minute(_ date: Date) -> String {
        Timestamp.format(date).prefix(16).replacingOccurrences(of: "T", with: " ") + " UTC"
    }

    /// How fresh the figures of a page are: the `dataAsOf` of its reports (the oldest, when it shows
    /// several; nil while one has applied no event), so that replica lag and projection lag show. With
    /// the `eventsFrom` of its reports (the latest that is set), as their `Events-From` header says it: from
    /// when they count events, once retention dropped older months their projections never read.
    static func dataAsOf(_ dates: Date?..., eventsFrom: Date?...) -> HTML {
        var since: HTML = ""
        if let latest = eventsFrom.compactMap({ $0 }).max() {
            let stamp = Timestamp.format(latest)
            since = """
                <p class="muted" id="events-from">Counted from events since <time datetime="\(stamp)">\(minute(latest))</time>: \
                older months of the log were dropped by retention</p>
                """
        }
        guard !dates.contains(where: { $0 == nil }), let oldest = dates.compactMap({ $0 }).min() else {
            return "<p class=\"muted\" id=\"data-as-of\">Data as of: no event applied yet</p>\(since)"
        }
        let stamp = Timestamp.format(oldest)
        let shown = stamp.prefix(19).replacingOccurrences(of: "T", with: " ")
        return "<p class=\"muted\" id=\"data-as-of\">Data as of <time datetime=\"\(stamp)\">\(shown) UTC</time></p>\(since)"
    }
}
