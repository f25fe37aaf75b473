import Foundation
import Hummingbird
import UpshiftCore

/// A feed's query, read as the clients send it: the parameters a feed knows must be valid text, once
/// each (`400` naming the parameter); every other parameter is ignored whatever it holds, since
/// Sparkle appends its system profile and upgrader a cache buster with unencoded values. A `lenient`
/// parameter is never refused: a value that breaks a rule, or comes again, is left out (the first valid
/// one counts; Sparkle's profile appends a `lang` of its own), and the parameter is named in ``malformed``.
struct UpdateFeedQuery {
    private var values: [String: String] = [:]
    /// Lenient parameters with a value left out for breaking a rule or coming again.
    private(set) var malformed: Set<String> = []

    init(_ request: Request, known: Set<String>, lenient: Set<String> = []) throws {
        guard let query = request.uri.query, !query.isEmpty else { return }
        for pair in query.utf8.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            guard let name = RequestText.percentDecoded(parts[0]), known.contains(name) else { continue }
            let value = parts.count > 1 ? RequestText.percentDecoded(parts[1]) : ""
            let problem: String? =
                if let value {
                    values[name] != nil
                        ? "is given more than once"
                        : TextRules.violation(in: value, lineBreaks: false)
                            ?? (name == "lang" && EventValidator.localeTag(value) == nil ? "is not a locale tag" : nil)
                } else {
                    "is not percent-encoded UTF-8"
                }
            guard let problem else {
                values[name] = value
                continue
            }
            guard lenient.contains(name) else { throw ProblemDetails.badRequest("\(name) \(problem)", field: name) }
            malformed.insert(name)
        }
    }

    subscript(name: String) -> String? { values[name] }

    /// `platform`, required.
    func platform() throws -> Platform {
        try Platform.required(values["platform"])
    }

    /// `channel`: `live` (the default) or `beta`.
    func channel() throws -> UpshiftCore.Channel {
        guard let text = values["channel"] else { return .live }
        guard let channel = UpshiftCore.Channel(rawValue: text) else {
            throw ProblemDetails.badRequest("channel must be live or beta", field: "channel")
        }
        return channel
    }

    /// The notes' locale: the first `lang` that is a locale tag, else the first tag of `Accept-Language`,
    /// normalized; nil falls back to the app's default locale. Neither is ever refused.
    func locale(_ request: Request) -> String? {
        if let lang = values["lang"], let tag = EventValidator.localeTag(lang) { return LocaleTag.normalize(tag) }
        guard let header = request.headers[.acceptLanguage] else { return nil }
        let first = header.split(separator: ",").first.map { $0.split(separator: ";").first ?? $0 } ?? ""
        return EventValidator.localeTag(first.trimmingCharacters(in: .whitespaces)).map(LocaleTag.normalize)
    }
}
