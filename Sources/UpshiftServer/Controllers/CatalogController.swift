import Foundation
import Hummingbird
import NIOCore
import UpshiftCore
import UpshiftStore

/// The admin API (docs/ARCHITECTURE.md, "The catalog write path"): apps, releases, policies and history,
/// under `/v1/apps`. Writes go through `CatalogStore`, the same code the CLI uses. One feature per file:
/// `+Apps`, `+Releases`, `+Policies`, `+Rules`, `+History`.
struct CatalogController: Sendable {
    let store: CatalogStore
    /// What the rules' evaluation recorded.
    let records: RuleRecordStore
    let clock: any WallClock
    /// Reloads this instance's check snapshot, so that a write is visible here as soon as it is
    /// answered (other instances follow on NOTIFY).
    let afterWrite: @Sendable () async -> Void
    /// Catalog bodies are small; anything larger is refused.
    static let maximumBody = 256 * 1024

    /// The routes, relative to `/v1/apps`, behind `authentication`; each group asks its access of the caller.
    func routes(authentication: BearerAuthentication, readers: ReaderShares) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: authentication)
        routes.group().add(middleware: RequireAccess(.createApps))
            .post(use: createApp)
        routes.group(":app").add(middleware: RequireAccess(.read)).add(middleware: ReaderShare(shares: readers))
            .get(use: app)
            .get("releases", use: releases)
            .get("releases/:platform/:version", use: release)
            .get("policies/:platform", use: policy)
            .get("history", use: history)
            .get("rules", use: rules)
            .get("rules/:platform/:rule", use: rule)
            .get("rules/:platform/:rule/records", use: ruleRecords)
        routes.group(":app").add(middleware: RequireAccess(.write))
            .patch(use: patchApp)
            .post("releases", use: addRelease)
            .patch("releases/:platform/:version", use: patchRelease)
            .put("policies/:platform", use: putPolicy)
            .put("rules/:platform/:rule", use: putRule)
            .delete("rules/:platform/:rule", use: deleteRule)
        return routes
    }

    // MARK: Shared by the features

    struct Revisioned<Value: Encodable & Sendable>: Encodable {
        var value: Value
        var warnings: [String]

        func encode(to encoder: any Encoder) throws {
            try value.encode(to: encoder)
            if !warnings.isEmpty {
                var container = encoder.container(keyedBy: WarningKey.self)
                try container.encode(warnings, forKey: .warnings)
            }
        }

        enum WarningKey: String, CodingKey { case warnings }
    }

    /// A value with its revision as `ETag: "n"`, and warnings in the body when there are any.
    func revisioned<Value: Encodable & Sendable>(_ write: CatalogWrite<Value>, status: HTTPResponse.Status) throws -> Response {
        try JSONResponse.make(
            Revisioned(value: write.value, warnings: write.warnings), status: status,
            headers: [.eTag: "\"\(write.revision)\""], encoder: CatalogCoding.encoder())
    }

    /// `If-Match: "n"`: `428` without it.
    func ifMatch(_ request: Request) throws -> Int {
        guard let header = request.headers[.ifMatch] else {
            throw ProblemDetails(.ifMatchRequired, detail: "send If-Match with the ETag you read (\"0\" for a policy never set)")
        }
        // `"n"` or `W/"n"`, n a revision without leading zeros and of at most 18 digits, as the spec's
        // pattern says (no revision comes near it).
        var tag = Substring(header.trimmingCharacters(in: .whitespaces))
        if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
        let digits = tag.dropFirst().dropLast()
        guard tag.count >= 3, tag.hasPrefix("\""), tag.hasSuffix("\""), digits == "0" || !digits.hasPrefix("0"),
            let revision = TextRules.integer(digits, in: 0...999_999_999_999_999_999)
        else {
            throw ProblemDetails.badRequest("If-Match must be an ETag such as \"3\"", field: "If-Match")
        }
        return revision
    }

    /// A JSON body of at most 256 KiB, read strictly (``JSONParser``); a problem names the member at fault.
    static func json(_ request: Request) async throws -> JSONValue {
        try request.requireContentType("application/json")
        let body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBody)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("at most 256 KiB")
        }
        return try JSONParser.parse(Array(body.readableBytesView))
    }

    /// Runs a store write and reloads this instance's snapshot after it.
    func written<T>(_ body: () async throws -> T) async throws -> T {
        let result = try await body()
        await afterWrite()
        return result
    }
}
