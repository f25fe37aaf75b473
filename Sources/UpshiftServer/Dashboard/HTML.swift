import Foundation

/// A piece of HTML. Interpolated values are escaped unless they are `HTML` themselves, so a page
/// cannot be made to run what a user typed (a release note, a reason, a key name).
struct HTML: Sendable, Equatable, CustomStringConvertible, ExpressibleByStringInterpolation {
    var text: String

    init(raw text: String) { self.text = text }
    init(stringLiteral value: String) { text = value }
    init(stringInterpolation: StringInterpolation) { text = stringInterpolation.text }

    var description: String { text }

    /// Escapes by Unicode scalar, not by `Character`: a `"` followed by a combining mark is one grapheme
    /// cluster, and a per-character escape would let it through.
    static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "\"": escaped += "&quot;"
            case "'": escaped += "&#39;"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    struct StringInterpolation: StringInterpolationProtocol {
        var text = ""

        init(literalCapacity: Int, interpolationCount: Int) { text.reserveCapacity(literalCapacity * 2) }

        mutating func appendLiteral(_ literal: String) { text += literal }
        mutating func appendInterpolation(_ html: HTML) { text += html.text }
        mutating func appendInterpolation(_ parts: [HTML]) { for part in parts { text += part.text } }
        mutating func appendInterpolation(_ value: some CustomStringConvertible) { text += HTML.escape(value.description) }
        mutating func appendInterpolation(_ value: (some CustomStringConvertible)?) {
            if let value { text += HTML.escape(value.description) }
        }
    }
}

extension Array where Element == HTML {
    func joined() -> HTML { HTML(raw: map(\.text).joined()) }
}

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
}
