import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftStore

@testable import UpshiftServer

/// No domain error escapes as a 500: whatever a service throws for a client's mistake becomes its 4xx
/// wherever it is thrown, also from a route that wraps nothing (docs/ARCHITECTURE.md, "One error mapping."), as a
/// problem from the API and as a page with the same status from the dashboard.
@Suite(.serverTimeLimit) struct ErrorMappingTests {
    static let errors: [(name: String, error: any Error & Sendable, status: Int, field: String?)] = [
        ("CatalogError.appNotFound", CatalogError.appNotFound("x"), 404, nil),
        ("CatalogError.releaseNotFound", CatalogError.releaseNotFound("ios 1.0 of x"), 404, nil),
        ("CatalogError.appExists", CatalogError.appExists("x"), 409, nil),
        ("CatalogError.releaseExists", CatalogError.releaseExists("ios 1.0 of x"), 409, nil),
        ("CatalogError.stale", CatalogError.stale(current: 3), 412, nil),
        ("CatalogError.invalid", CatalogError.invalid(FieldError("notes.en", "bad")), 400, "notes.en"),
        ("FieldError", FieldError("name", "too long"), 400, "name"),
        ("FieldError inconsistent", FieldError("minimumOSVersion", "above", kind: .inconsistent), 422, "minimumOSVersion"),
        ("JSONParseError", JSONParseError(path: "notes.en[2]", message: "not Unicode"), 400, "notes.en[2]"),
        ("JSONParseError limit", JSONParseError(path: "events", message: "more than 500", isLimit: true), 413, nil),
        ("IngestionError.databaseUnavailable", IngestionError.databaseUnavailable, 503, nil),
        ("IngestionError.overloaded", IngestionError.overloaded, 503, nil),
        ("IngestionError.shuttingDown", IngestionError.shuttingDown, 503, nil),
        ("AuthenticationRequired", AuthenticationRequired("no key"), 401, nil),
        ("AccessDenied", AccessDenied("not yours"), 403, nil),
        ("ReportStore.NotReady", ReportStore.NotReady(projection: "adoption"), 503, nil),
        ("DatabaseUnavailable.busy", DatabaseUnavailable(pool: "reads", reason: .busy(.seconds(2))), 503, nil),
        ("DatabaseUnavailable.timedOut", DatabaseUnavailable(pool: "hot", reason: .timedOut(.seconds(5))), 503, nil),
        ("DatabaseUnavailable.statementTimeout", DatabaseUnavailable(pool: "reads", reason: .statementTimeout), 503, nil),
        ("DatabaseUnavailable.conflict", DatabaseUnavailable(pool: "reports", reason: .conflict), 503, nil),
        ("DatabaseUnavailable.connectionLost", DatabaseUnavailable(pool: "hot", reason: .connectionLost), 503, nil),
        ("DatabaseUnavailable.poolFailed", DatabaseUnavailable(pool: "reads", reason: .poolFailed("circuit breaker tripped")), 503, nil),
        ("body too large", NIOTooManyBytesError(maxBytes: 1), 413, nil),
        ("body too slow", RequestTimedOut(), 408, nil),
        ("request broke off", HTTPParserError.invalidEOFState, 400, nil),
    ]

    /// A route in the path space of each controller, throwing each error from a bare closure.
    static let controllers = [
        "/v1/apps/:app/check", "/v1/events", "/v1/apps/:app/releases", "/v1/apps/:app/reports/adoption", "/health/live",
    ]

    /// A bad platform is one error wherever it is named: the query, the path, a JSON body, a map's key or
    /// an event answer ``Platform/problem(with:)``, naming the field; `IOS` is told it is `ios`.
    static let lowercaseIOS = "a platform is lowercase, for example ios"

    @Test func aBadPlatformIsTheOneFieldErrorOnEveryRoute() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let app = "/v1/apps/\(harness.appId)"
            let cases: [(HTTPMethod, String, String?, JSONValue?, String)] = [
                (.GET, "\(app)/check?platform=IOS&version=1.0", nil, nil, "platform"),
                (.GET, "\(app)/appcast.xml?platform=IOS", nil, nil, "platform"),
                (.GET, "\(app)/versions.plist?platform=IOS", nil, nil, "platform"),
                (.GET, "\(app)/reports/adoption?platform=IOS", harness.readKey, nil, "platform"),
                (.GET, "\(app)/releases?platform=IOS", harness.readKey, nil, "platform"),
                (.GET, "\(app)/policies/IOS", harness.readKey, nil, "platform"),
                (.POST, "\(app)/releases", harness.adminKey,
                 ["platform": "IOS", "version": "1.0", "releasedAt": "2026-11-01T00:00:00Z"], "platform"),
                (.PATCH, app, harness.adminKey, ["updateURL": ["IOS": "https://example.com"]], "updateURL.IOS"),
            ]
            for (method, path, key, body, field) in cases {
                let reply = try await server.send(method, path, key: key, json: body, headers: [("If-Match", "\"1\"")])
                #expect(reply.status == 400, "\(method) \(path)")
                let problem = try reply.value()
                #expect(problem["field"] == .string(field), "\(method) \(path)")
                #expect(problem["detail"] == .string("\(field): \(Self.lowercaseIOS)"), "\(method) \(path)")
            }
            let event = clientEvent(occurredAt: Date(), extra: ["platform": "IOS"])
            let results = try #require(try await server.postEvents([event], key: harness.ingestKey).json()["results"] as? [[String: Any]])
            #expect(results.first?["field"] as? String == "platform")
            #expect((results.first?["message"] as? String)?.contains(Self.lowercaseIOS) == true, "\(results)")
        }
        // The CLI refuses it before it reads or sends anything, with the same rule.
        let url = harness.databaseURL
        for arguments in [["policy", "show"], ["releases", "list"], ["releases", "withdraw", "--version", "1.0", "--reason", "x"]] {
            let refused = try await BinaryTests.command(arguments + ["--app", harness.appId.rawValue, "--platform", "IOS"], databaseURL: url)
            #expect(refused.status != 0 && refused.error.contains(Self.lowercaseIOS), "\(arguments): \(refused.error)")
        }
    }

    @Test func everyDomainErrorFromEveryControllerBecomesItsStatus() async throws {
        let router = Router(context: UpshiftRequestContext.self)
        router.middlewares.add(ProblemMiddleware())
        for (index, entry) in Self.errors.enumerated() {
            for path in Self.controllers {
                let error = entry.error
                router.get("\(path)/thrown/\(index)") { _, _ -> Response in throw error }
            }
        }
        let app = Application(router: router)
        try await app.test(.router) { client in
            for (index, entry) in Self.errors.enumerated() {
                for path in Self.controllers {
                    let uri = path.replacingOccurrences(of: ":app", with: "expenses") + "/thrown/\(index)"
                    try await client.execute(uri: uri, method: .get) { response in
                        #expect(Int(response.status.code) == entry.status, "\(entry.name) at \(path)")
                        #expect(response.headers[.contentType] == "application/problem+json")
                        let problem = try JSONDecoder().decode(ProblemDetails.self, from: Data(response.body.readableBytesView))
                        #expect(problem.field == entry.field, "\(entry.name)")
                        #expect(problem.type != "urn:upshift:problem:internal", "\(entry.name)")
                        // Every 503 says when to come back.
                        if entry.status == 503 { #expect(response.headers[.retryAfter] != nil, "\(entry.name)") }
                    }
                }
            }
        }
    }
}

extension ErrorMappingTests {
    @Test func theDashboardShowsTheSameMappingAsPages() async throws {
        let router = Router(context: UpshiftRequestContext.self)
        router.middlewares.add(ProblemMiddleware())
        let pages = router.group("dashboard").add(middleware: DashboardErrorMiddleware())
        for (index, entry) in Self.errors.enumerated() {
            let error = entry.error
            pages.get("thrown/\(index)") { _, _ -> Response in throw error }
            pages.post("thrown/\(index)") { _, _ -> Response in throw error }
        }
        let app = Application(router: router)
        try await app.test(.router) { client in
            for (index, entry) in Self.errors.enumerated() {
                for method in [HTTPRequest.Method.get, .post] {
                    try await client.execute(uri: "/dashboard/thrown/\(index)", method: method) { response in
                        let type = response.headers[.contentType] ?? ""
                        switch entry.status {
                        case 401 where method == .get:  // no session: to the sign-in form
                            #expect(response.status == .seeOther && response.headers[.location] == "/dashboard", "\(entry.name)")
                        case 500...:  // not the client's doing: the API's problem JSON
                            #expect(Int(response.status.code) == entry.status && type == "application/problem+json", "\(entry.name)")
                        default:
                            #expect(Int(response.status.code) == entry.status, "\(entry.name) \(method)")
                            #expect(type.hasPrefix("text/html"), "\(entry.name) \(method)")
                        }
                    }
                }
            }
        }
    }
}
