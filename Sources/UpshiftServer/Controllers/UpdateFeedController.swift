import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// The update feeds for client libraries apps already ship (docs/CLIENTS.md): the Sparkle appcast, the
/// iTunes lookup and iVersion's versions plist. Public and limited per client like the check (its routes
/// share the check's limiter, ``CheckController/routes``), answered from the catalog snapshot, never from
/// the database, and kept in the check's byte-bounded answer cache per snapshot and normalized parameters.
struct UpdateFeedController: Sendable {
    let snapshot: CatalogSnapshot
    let clock: any WallClock
    let answers: CheckAnswerCache

    /// `GET …/appcast.xml?platform=[&channel=][&lang=]`
    @Sendable func appcast(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = try UpdateFeedQuery(request, known: ["platform", "channel", "lang"], lenient: ["lang"])
        let platform = try query.platform()
        let parameters = try CheckAnswerCache.UpdateFeedParameters(
            kind: .appcast, platform: platform, channel: query.channel(), locale: query.locale(request))
        return try feed(parameters, request: request, context: context, contentType: "application/rss+xml; charset=utf-8") {
            Appcast.render($0, locale: parameters.locale)
        }
    }

    /// `GET …/versions.plist?platform=[&channel=][&lang=]`
    @Sendable func versionsPlist(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let query = try UpdateFeedQuery(request, known: ["platform", "channel", "lang"], lenient: ["lang"])
        let parameters = try CheckAnswerCache.UpdateFeedParameters(
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
        let query = try UpdateFeedQuery(request, known: known, lenient: known)
        var platform = AppStoreLookup.platform(entity: query["entity"])
        var unusable = !query.malformed.isDisjoint(with: ["platform", "bundleId", "id"])
        if let named = query["platform"] {
            if let named = Platform(validating: named) { platform = named } else { unusable = true }
        }
        guard let app = snapshot.app(in: context).map(\.entry.catalog.app) else {
            // 400 when the segment is not text, 404 when it cannot be an app id at all.
            let text = try context.pathValue("app")
            guard AppID.isValid(text) else { throw CatalogError.appNotFound(text) }
            return EntityTag.response(
                to: request, etag: Self.noLookupResultTag, headers: Self.noLookupResultHeaders, body: Self.noLookupResult)
        }
        let refused = unusable
            || !AppStoreLookup.matches(app, platform: platform, bundleId: query["bundleId"], id: query["id"])
        // An app without a bundle id for the platform answers with the one it was asked for, as Apple's
        // answer always names one (part of the cache key only then).
        let echoed = refused || app.bundleId[platform] != nil ? nil : query["bundleId"]
        let parameters = CheckAnswerCache.UpdateFeedParameters(
            kind: .lookup, platform: platform, channel: .live, locale: query.locale(request),
            refused: refused, bundleId: echoed)
        return try feed(parameters, request: request, context: context, contentType: "application/json; charset=utf-8") {
            let answer = refused
                ? AppStoreLookup.Answer.empty : AppStoreLookup.answer($0, locale: parameters.locale, bundleId: parameters.bundleId)
            return String(decoding: try CheckController.encoder.encode(answer), as: UTF8.self)
        }
    }

    /// The lookup's answer for an app this server does not know: `{"resultCount":0,"results":[]}`.
    static let noLookupResult = ByteBuffer(string: #"{"resultCount":0,"results":[]}"#)
    static let noLookupResultTag = "\"\(EntityTag.fnv1a(Data(noLookupResult.readableBytesView)))\""
    /// Its headers: kept a minute, so that an app created meanwhile is soon found.
    static let noLookupResultHeaders: HTTPFields = [
        .contentType: "application/json; charset=utf-8", .eTag: noLookupResultTag, .vary: "Accept-Language",
        .cacheControl: "public, max-age=60",
    ]

    /// The cached feed answer for this snapshot and clock interval, else `render` it and keep it.
    private func feed(
        _ parameters: CheckAnswerCache.UpdateFeedParameters, request: Request, context: UpshiftRequestContext, contentType: String,
        render: (UpdateFeedView) throws -> String
    ) throws -> Response {
        guard let (appId, entry) = snapshot.app(in: context) else { throw CatalogError.appNotFound(try context.pathValue("app")) }
        let now = clock.now()
        let interval = entry.timing.interval(platform: parameters.platform, now: now)
        let question = CheckAnswerCache.UpdateFeedQuestion(app: appId, generation: entry.generation, parameters: parameters)
        let answer: CheckAnswerCache.UpdateFeedAnswer
        if let cached = answers.feed(question, interval: interval) {
            answer = cached
        } else {
            let feed = UpdateFeedView(entry.catalog, platform: parameters.platform, channel: parameters.channel, now: now)
            let body = Data(try render(feed).utf8)
            let etag = "\"\(EntityTag.fnv1a(body))\""
            answer = CheckAnswerCache.UpdateFeedAnswer(
                body: ByteBuffer(bytes: body), etag: etag,
                headers: [
                    .contentType: contentType, .eTag: etag, .vary: "Accept-Language",
                    .cacheControl: "public, max-age=\(entry.catalog.policy(for: parameters.platform).checkIntervalSeconds)",
                ],
                interval: interval)
            answers.store(answer, for: question)
        }
        return EntityTag.response(to: request, etag: answer.etag, headers: answer.headers, body: answer.body)
    }
}
