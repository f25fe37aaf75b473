import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// The query of a request, read strictly: every parameter percent-decoded to UTF-8 text without control
/// characters, each name at most once. A parameter that breaks a rule is a `400` naming it, wherever it
/// is read, so that no value reaches a rule (or PostgreSQL) half-decoded.
struct QueryParameters: Sendable {
    private(set) var values: [String: String] = [:]

    init(_ request: Request) throws {
        try self.init(query: request.uri.query)
    }

    init(query: String?) throws {
        guard let query, !query.isEmpty else { return }
        values = try RequestText.pairs(Array(query.utf8), of: "query", plusIsSpace: false, lineBreaksInValues: false)
    }

    subscript(name: String) -> String? { values[name] }

    /// A `400` naming the first parameter outside `allowed`.
    func refuseUnknown(allowed: Set<String>) throws {
        if let unknown = values.keys.sorted().first(where: { !allowed.contains($0) }) {
            throw ProblemDetails.badRequest(
                "unknown parameter \(unknown) (allowed: \(allowed.sorted().joined(separator: ", ")))", field: unknown)
        }
    }

    /// An integer parameter within `range`, `value` when absent; otherwise a `400` naming it.
    func integer(_ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = values[name] else { return value }
        guard let number = TextRules.integer(text, in: range) else {
            throw ProblemDetails.badRequest("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)", field: name)
        }
        return number
    }
}

/// Text that arrives in a request's target (path segments, query parameters) or in a form.
enum RequestText {
    /// `name=value&…` (a query, or an `application/x-www-form-urlencoded` body) as names and values,
    /// percent-decoded to UTF-8 text without control characters (line breaks only in values, and only
    /// when `lineBreaksInValues`), each name at most once. `+` is a space in a form, itself in a query
    /// (RFC 3986). Anything else is a `400` naming the parameter (`whole` for a name that is not text).
    static func pairs(
        _ bytes: [UInt8], of whole: String, plusIsSpace: Bool, lineBreaksInValues: Bool
    ) throws -> [String: String] {
        var pairs: [String: String] = [:]
        for pair in bytes.split(separator: UInt8(ascii: "&")) {
            let parts = pair.split(separator: UInt8(ascii: "="), maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ raw: ArraySlice<UInt8>, _ name: String?) throws -> String {
                let field = name ?? whole
                let what = name ?? "a name"
                // `+` as a space: decoded as the `%20` it stands for.
                let spaced = plusIsSpace ? raw.flatMap { $0 == UInt8(ascii: "+") ? Array("%20".utf8) : [$0] } : Array(raw)
                guard let text = percentDecoded(spaced) else {
                    throw ProblemDetails.badRequest("\(what) is not percent-encoded UTF-8", field: field)
                }
                if let violation = TextRules.violation(in: text, lineBreaks: name != nil && lineBreaksInValues) {
                    throw ProblemDetails.badRequest("\(what) \(violation)", field: field)
                }
                return text
            }
            let name = try decode(parts[0], nil)
            let value = parts.count > 1 ? try decode(parts[1], name) : ""
            guard pairs.updateValue(value, forKey: name) == nil else {
                throw ProblemDetails.badRequest("\(name) is given more than once", field: name)
            }
        }
        return pairs
    }

    /// `raw` percent-decoded, or nil when it holds a byte outside printable ASCII (a request target is
    /// ASCII), a `%` not followed by two hex digits, or decodes to bytes that are not UTF-8.
    static func percentDecoded(_ raw: some Collection<UInt8>) -> String? {
        // Nothing to decode (the common case): the text as it is.
        if raw.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "%") }) {
            return String(decoding: raw, as: UTF8.self)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(raw.count)
        var iterator = raw.makeIterator()
        while let byte = iterator.next() {
            guard byte > 0x20, byte < 0x7F else { return nil }
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next().flatMap(UUIDText.nibble), let low = iterator.next().flatMap(UUIDText.nibble)
                else { return nil }
                bytes.append(high << 4 | low)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension UpshiftRequestContext {
    /// A path parameter, percent-decoded the same way on every route (`1.2.0%2B7` is `1.2.0+7`): a `400`
    /// naming it when it does not decode to text without control characters.
    func pathValue(_ name: String) throws -> String {
        guard let raw = parameters.get(name) else { throw ProblemDetails.badRequest("\(name) is missing", field: name) }
        guard let text = RequestText.percentDecoded(raw.utf8),
            TextRules.violation(in: text, lineBreaks: false) == nil
        else { throw ProblemDetails.badRequest("\(name) is not percent-encoded UTF-8 text", field: name) }
        return text
    }

    /// The `{app}` of the path: `400` naming it when it is not text (bytes that are not UTF-8, control
    /// characters), as every parameter; text that is not an app id names no app: `404`.
    func appId() throws -> AppID {
        let text = try pathValue("app")
        guard let app = AppID(validating: text) else { throw CatalogError.appNotFound(text) }
        return app
    }

    /// The path's `{app}`, known to the check's snapshot: `404` when no app has that id.
    func knownApp(in snapshot: CatalogSnapshot) throws -> AppID {
        let app = try appId()
        guard snapshot.app(app) != nil else { throw CatalogError.appNotFound(app.rawValue) }
        return app
    }

    /// The catalog of the path's `{app}`: `404` when no app has that id.
    func app(in store: CatalogStore) async throws -> AppCatalog {
        let appId = try appId()
        guard let app = try await store.app(id: appId) else { throw CatalogError.appNotFound(appId.rawValue) }
        return app
    }

    /// A `{version}` of the path (docs/ARCHITECTURE.md, "Versions").
    func pathVersion(_ name: String = "version") throws -> Version {
        let text = try pathValue(name)
        guard let version = Version(text) else {
            throw ProblemDetails.badRequest("\(name): '\(text)' is not a version (\(Version.syntax))", field: name)
        }
        return version
    }

    /// A `{platform}` of the path.
    func pathPlatform() throws -> Platform {
        try Platform(pathValue("platform"))
    }
}

extension Request {
    /// `Content-Type` is `mediaType` (parameters such as `charset=utf-8` aside), else `415`.
    func requireContentType(_ mediaType: String) throws {
        guard Self.contentType(headers[.contentType] ?? "", is: mediaType) else {
            throw ProblemDetails(.unsupportedMediaType, detail: "send Content-Type: \(mediaType)")
        }
    }

    /// Whether a `Content-Type` value names `mediaType` (lowercase ASCII): the part before any `;`, without
    /// the spaces and tabs around it (RFC 9110's optional whitespace), compared without ASCII case. Bytes,
    /// not Foundation's trimming, which took 3 % of the server's CPU under one event per request.
    static func contentType(_ value: String, is mediaType: String) -> Bool {
        func blank(_ byte: UInt8) -> Bool { byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        var type = value.utf8.prefix { $0 != UInt8(ascii: ";") }
        while let first = type.first, blank(first) { type = type.dropFirst() }
        while let last = type.last, blank(last) { type = type.dropLast() }
        return type.count == mediaType.utf8.count
            && zip(type, mediaType.utf8).allSatisfy { byte, expected in
                (byte >= UInt8(ascii: "A") && byte <= UInt8(ascii: "Z") ? byte | 0x20 : byte) == expected
            }
    }
}

extension Platform {
    /// The `platform` a request must name: absent or empty is "platform is required"; otherwise the one
    /// field error of a bad platform (``Platform/init(_:field:)``).
    static func required(_ text: String?) throws -> Platform {
        guard let text, !text.isEmpty else { throw ProblemDetails.badRequest("platform is required", field: "platform") }
        return try Platform(text)
    }
}
