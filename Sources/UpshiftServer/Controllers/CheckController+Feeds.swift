import Foundation
import HTTPTypes
import Hummingbird
import Metrics
import NIOCore
import UpshiftCore
import UpshiftStore

/// The feeds for client libraries apps already ship (docs/CLIENTS.md): the Sparkle appcast, the iTunes
/// lookup and iVersion's versions plist. Public and limited per client like the check (they share its
/// limiter), answered from the catalog snapshot, never from the database, and kept in the check's
/// byte-bounded answer cache per snapshot and normalized parameters.
extension CheckController {
    /// `GET …/appcast.xml?platform=[&channel=][&lang=]`
    @Sendable func appcast(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = try FeedQuery(request, known: ["platform", "channel", "lang"], lenient: ["lang"])
        let platform = try query.platform()
        let parameters = try CheckAnswerCache.FeedParameters(
            kind: .appcast, platform: platform, channel: query.channel(), locale: query.locale(request))
        return try feed(parameters, request: request, context: context, contentType: "application/rss+xml; charset=utf-8") {
            Appcast.render($0, locale: parameters.locale)
        }
    }

    /// `GET …/versions.plist?platform=[&channel=][&lang=]`
    @Sendable func versionsPlist(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = try FeedQuery(request, known: ["platform", "channel", "lang"], lenient: ["lang"])
        let parameters = try CheckAnswerCache.FeedParameters(
            kind: .versionsPlist, platform: query.platform(), channel: query.channel(),
            locale: query.locale(request))
        return try feed(parameters, request: request, context: context, contentType: "application/x-plist; charset=utf-8") {
            VersionsPlist.render($0, locale: parameters.locale)
        }
    }

    /// `GET …/lookup` and `GET …/{cc}/lookup`, as Apple's `itunes.apple.com/lookup` answers: always `200`, an
    /// unknown app included (no result, as Apple answers an id it does not know); only a path that cannot be
    /// one (an app segment that is no app id, a `{cc}` that is not two letters) is `404`.
    @Sendable func lookup(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        if let country = context.parameters.get("country") {  // as sent: two letters need no decoding
            guard country.utf8.count == 2, country.utf8.allSatisfy({ ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A }) else {
                throw ProblemDetails.notFound("no such path: a store country is two letters, such as us")
            }
        }
        // As Apple's: no parameter is an error. One that cannot be what it names finds no result (a
        // platform, bundle id or store id that is not valid text, or given twice); a bad lang is ignored.
        let known: Set = ["platform", "entity", "bundleId", "id", "lang"]
        let query = try FeedQuery(request, known: known, lenient: known)
        var platform = StoreLookup.platform(entity: query["entity"])
        var unusable = !query.malformed.isDisjoint(with: ["platform", "bundleId", "id"])
        if let named = query["platform"] {
            if EventValidator.isPlatform(named) { platform = named } else { unusable = true }
        }
        guard let app = self.app(context).map(\.entry.catalog.app) else {
            // 400 when the segment is not text, 404 when it cannot be an app id at all.
            let appId = try context.pathValue("app")
            guard AppID.isValid(appId) else { throw CatalogError.appNotFound(appId) }
            let headers = Self.noLookupResultHeaders
            if Self.matches(request.headers[.ifNoneMatch], etag: headers[.eTag] ?? "") {
                return Response(status: .notModified, headers: headers)
            }
            return Response(
                status: .ok, headers: headers + [.contentType: "application/json; charset=utf-8"],
                body: .init(byteBuffer: Self.noLookupResult))
        }
        let refused = unusable
            || !StoreLookup.matches(app, platform: platform, bundleId: query["bundleId"], id: query["id"])
        // An app without a bundle id for the platform answers with the one it was asked for, as Apple's
        // answer always names one (part of the cache key only then).
        let echoed = refused || app.bundleId[platform] != nil ? nil : query["bundleId"]
        let parameters = CheckAnswerCache.FeedParameters(
            kind: .lookup, platform: platform, channel: .live, locale: query.locale(request),
            refused: refused, bundleId: echoed)
        return try feed(parameters, request: request, context: context, contentType: "application/json; charset=utf-8") {
            let answer = refused
                ? StoreLookup.Answer.empty : StoreLookup.answer($0, locale: parameters.locale, bundleId: parameters.bundleId)
            return String(decoding: try Self.encoder.encode(answer), as: UTF8.self)
        }
    }

    /// The lookup's answer for an app this server does not know: `{"resultCount":0,"results":[]}`.
    static let noLookupResult = ByteBuffer(string: #"{"resultCount":0,"results":[]}"#)
    /// Its headers but the type: kept a minute, so that an app created meanwhile is soon found.
    static let noLookupResultHeaders: HTTPFields = [
        .eTag: "\"\(fnv1a(Data(noLookupResult.readableBytesView)))\"", .vary: "Accept-Language",
        .cacheControl: "public, max-age=60",
    ]

    /// The cached feed answer for this snapshot and clock interval, else `render` it and keep it.
    private func feed(
        _ parameters: CheckAnswerCache.FeedParameters, request: Request, context: UpshiftRequestContext, contentType: String,
        render: (FeedView) throws -> String
    ) throws -> Response {
        guard let (appId, entry) = app(context) else { throw CatalogError.appNotFound(try context.pathValue("app")) }
        let now = clock.now()
        let interval = entry.timing.interval(platform: parameters.platform, now: now)
        let question = CheckAnswerCache.FeedQuestion(app: appId, generation: entry.generation, parameters: parameters)
        let answer: CheckAnswerCache.FeedAnswer
        if let cached = answers.feed(question, interval: interval) {
            answer = cached
        } else {
            let feed = FeedView(entry.catalog, platform: parameters.platform, channel: parameters.channel, now: now)
            let body = Data(try render(feed).utf8)
            let etag = "\"\(Self.fnv1a(body))\""
            answer = CheckAnswerCache.FeedAnswer(
                body: ByteBuffer(bytes: body), etag: etag,
                headers: [
                    .contentType: contentType, .eTag: etag, .vary: "Accept-Language",
                    .cacheControl: "public, max-age=\(entry.catalog.policy(for: parameters.platform).checkIntervalSeconds)",
                ],
                interval: interval)
            answers.store(answer, for: question)
            cacheBytes.set(Double(answers.bytes))
        }
        if Self.matches(request.headers[.ifNoneMatch], etag: answer.etag) {
            var headers = answer.headers
            headers[.contentType] = nil
            return Response(status: .notModified, headers: headers)
        }
        return Response(status: .ok, headers: answer.headers, body: .init(byteBuffer: answer.body))
    }
}

/// A feed's query, read as the clients send it: the parameters a feed knows must be valid text, once
/// each (`400` naming the parameter); every other parameter is ignored whatever it holds, since
/// Sparkle appends its system profile and upgrader a cache buster with unencoded values. A `lenient`
/// parameter is never refused: a value that breaks a rule, or comes again, is left out (the first valid
/// one counts; Sparkle's profile appends a `lang` of its own), and the parameter is named in ``malformed``.
struct FeedQuery {
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
    func platform() throws -> String {
        guard let platform = values["platform"], !platform.isEmpty else {
            throw ProblemDetails.badRequest("platform is required", field: "platform")
        }
        guard EventValidator.isPlatform(platform) else {
            throw ProblemDetails.badRequest("platform: lowercase letters, digits, _ or -, at most 32", field: "platform")
        }
        return platform
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
