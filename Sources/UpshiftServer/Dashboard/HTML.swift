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

