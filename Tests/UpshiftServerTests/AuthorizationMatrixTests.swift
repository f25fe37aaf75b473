import Foundation
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// One authorization rule over every route the router answers, the API's and the dashboard's alike:
/// each caller (no token; an ingest key; read and admin tokens covering one app, another app or every
/// app; a revoked key; an expired session) is let through or refused as the route's need says. A
/// route missing from `needs` fails the test, so that no route is added without deciding who may use it.
@Suite(.serverTimeLimit) struct AuthorizationMatrixTests {
    enum Need: Sendable {
        case anyone, ingest, read, write, createApps
        /// Any signed-in dashboard session (sign-out).
        case session
        /// The sign-in form: the token in the form decides, not the caller (an empty one is refused).
        case signIn
    }

    /// Every route, by its pattern (`{name}` for a path parameter), and what it needs.
    static let needs: [String: Need] = [
        "GET /health/live": .anyone, "GET /health/ready": .anyone, "GET /health/db": .anyone,
        "GET /metrics": .anyone, "GET /openapi.yaml": .anyone, "GET /": .anyone,
        "GET /v1/apps/{app}/check": .anyone, "POST /v1/apps/{app}/check": .anyone,
        "GET /v1/apps/{app}/appcast.xml": .anyone, "GET /v1/apps/{app}/versions.plist": .anyone,
        "GET /v1/apps/{app}/lookup": .anyone, "GET /v1/apps/{app}/{country}/lookup": .anyone,
        "POST /v1/events": .ingest,
        "POST /v1/apps": .createApps,
        "GET /v1/apps/{app}": .read, "GET /v1/apps/{app}/releases": .read,
        "GET /v1/apps/{app}/releases/{platform}/{version}": .read, "GET /v1/apps/{app}/policies/{platform}": .read,
        "GET /v1/apps/{app}/history": .read,
        "POST /v1/apps/{app}/releases": .write, "PATCH /v1/apps/{app}/releases/{platform}/{version}": .write,
        "PUT /v1/apps/{app}/policies/{platform}": .write, "PATCH /v1/apps/{app}": .write,
        "GET /v1/apps/{app}/rules": .read, "GET /v1/apps/{app}/rules/{platform}/{rule}": .read,
        "GET /v1/apps/{app}/rules/{platform}/{rule}/records": .read,
        "PUT /v1/apps/{app}/rules/{platform}/{rule}": .write, "DELETE /v1/apps/{app}/rules/{platform}/{rule}": .write,
        "GET /v1/apps/{app}/reports/adoption": .read, "GET /v1/apps/{app}/reports/releases/{version}": .read,
        "GET /v1/apps/{app}/reports/prompts": .read, "GET /v1/apps/{app}/reports/minimum-impact": .read,
        "POST /v1/apps/{app}/preview": .read,
        // Raw events carry install ids (personal data): what an admin token may read, as it may write.
        "GET /v1/apps/{app}/events/export": .write,
        "DELETE /v1/apps/{app}/installs/{install}": .write, "GET /v1/apps/{app}/erasures/{erasure}": .write,
        // A webhook's URL may carry its receiver's secret: admin tokens only, reading too.
        "POST /v1/apps/{app}/webhooks": .write, "GET /v1/apps/{app}/webhooks": .write,
        "GET /v1/apps/{app}/webhooks/{webhook}": .write, "DELETE /v1/apps/{app}/webhooks/{webhook}": .write,
        "POST /v1/apps/{app}/webhooks/{webhook}/rotate": .write, "POST /v1/apps/{app}/webhooks/{webhook}/enable": .write,
        "POST /v1/apps/{app}/webhooks/{webhook}/test": .write, "GET /v1/apps/{app}/webhooks/{webhook}/deliveries": .write,
        "GET /dashboard": .anyone, "POST /dashboard/sign-in": .signIn, "POST /dashboard/sign-out": .session,
        "GET /dashboard/apps/{app}": .read, "GET /dashboard/apps/{app}/releases/{version}": .read,
        "GET /dashboard/apps/{app}/history": .read, "GET /dashboard/apps/{app}/rollout": .write,
        "POST /dashboard/apps/{app}/policy": .write, "POST /dashboard/apps/{app}/policy/preview": .write, "POST /dashboard/apps/{app}/minimum": .write,
        "POST /dashboard/apps/{app}/releases/{version}": .write,
        "GET /dashboard/apps/{app}/settings": .write, "POST /dashboard/apps/{app}/settings": .write,
        "POST /dashboard/apps/{app}/new-release/preview": .write, "POST /dashboard/apps/{app}/new-release": .write,
        "GET /dashboard/apps/{app}/rules": .read, "POST /dashboard/apps/{app}/rules/preview": .write,
        "POST /dashboard/apps/{app}/rules": .write,
        "GET /dashboard/apps/{app}/webhooks": .write, "POST /dashboard/apps/{app}/webhooks": .write,
        "POST /dashboard/apps/{app}/webhooks/{webhook}/{action}": .write,
    ]

    /// A caller: its secret, and what the rule grants it on app `expenses` (nil: the key is not valid).
    struct Caller: Sendable {
        var name: String
        var secret: String?
        var scope: KeyScope?
        /// The app its key covers; nil for every app.
        var app: String?
        var live = true

        /// What the rule should answer this caller for `need` on app `expenses`: nil lets it through.
        func refusal(_ need: Need) -> Int? {
            guard need != .anyone else { return nil }
            guard need != .signIn else { return 401 }
            guard live, let scope else { return 401 }
            let covers = app == nil || app == "expenses"
            switch need {
            case .anyone, .session: return nil
            case .signIn: return 401
            case .ingest: return scope == .ingest ? nil : 403
            case .read: return (scope == .read || scope == .admin) && covers ? nil : 403
            case .write: return scope == .admin && covers ? nil : 403
            case .createApps: return scope == .admin && app == nil ? nil : 403
            }
        }
    }

    @Test func everyRouteAsksTheOneRuleOfEveryCaller() async throws {
        let harness = try await Harness.make()
        let (scopedRead, otherAdmin, revoked, revokedLater) = try await harness.sql { client in
            let logger = TestEnvironment.logger
            _ = try await CatalogStore(client: client, logger: logger).createApp(
                AppInfo(id: "travel", name: "Travel"), actor: "tests", reason: nil, now: Date())
            let keys = KeyStore(client: client, logger: logger)
            let scopedRead = try await keys.create(name: "expenses-reports", scope: .read, appId: "expenses", now: Date()).1
            let otherAdmin = try await keys.create(name: "travel-owner", scope: .admin, appId: "travel", now: Date()).1
            let revoked = try await keys.create(name: "gone", scope: .admin, appId: nil, now: Date())
            _ = try await keys.revoke(revoked.0.id.uuidString, now: Date())
            let revokedLater = try await keys.create(name: "soon-gone", scope: .read, appId: nil, now: Date()).1
            return (scopedRead, otherAdmin, revoked.1, revokedLater)
        }
        let callers = [
            Caller(name: "no token", secret: nil, scope: nil),
            Caller(name: "ingest key", secret: harness.ingestKey, scope: .ingest, app: "expenses"),
            Caller(name: "read token, every app", secret: harness.readKey, scope: .read),
            Caller(name: "read token, this app", secret: scopedRead, scope: .read, app: "expenses"),
            Caller(name: "admin token, this app", secret: harness.adminKey, scope: .admin, app: "expenses"),
            Caller(name: "admin token, another app", secret: otherAdmin, scope: .admin, app: "travel"),
            Caller(name: "admin token, every app", secret: harness.rootKey, scope: .admin),
            Caller(name: "revoked key", secret: revoked, scope: .admin, live: false),
        ]
        let routes = try Self.routes(of: harness)
        #expect(routes.count == Self.needs.count)
        try await harness.run { server in
            // The API: bearer tokens on every route outside the dashboard.
            for route in routes where !route.pattern.contains(" /dashboard") {
                for caller in callers {
                    let reply = try await server.request(
                        route.method, route.path,
                        headers: caller.secret.map { [("Authorization", "Bearer \($0)")] } ?? [], followRedirects: false)
                    // `/health/db` answers 503 `unreachable` when `SELECT 1` took over its 1 s (under CI's load
                    // it did): the database's state, reported to a caller the rule let through.
                    if route.pattern == "GET /health/db", reply.status == 503, reply.text.contains("\"unreachable\"") {
                        #expect(caller.refusal(route.need) == nil, "\(route.pattern) as \(caller.name): 503")
                        continue
                    }
                    Self.expect(reply, for: caller.refusal(route.need), "\(route.pattern) as \(caller.name)")
                }
            }
            // The dashboard: a session signed in with each token that may sign in (sign-out last: it ends it).
            var sessions: [(Caller, DashboardTests.Browser)] = [(callers[0], DashboardTests.Browser(server: server))]
            for caller in callers.dropFirst(2).dropLast() {
                var browser = DashboardTests.Browser(server: server)
                #expect(try await browser.signIn(caller.secret!).status == 303, "\(caller.name) signs in")
                sessions.append((caller, browser))
            }
            // Signed in now, used only after the clock has moved past its 12 hours.
            var expiring = DashboardTests.Browser(server: server)
            _ = try await expiring.signIn(harness.readKey)
            // A session whose key is revoked after it began ends with the key.
            var revokedSession = DashboardTests.Browser(server: server)
            _ = try await revokedSession.signIn(revokedLater)
            try await harness.sql { client in
                _ = try await KeyStore(client: client, logger: TestEnvironment.logger).revoke("soon-gone", now: Date())
            }
            sessions.append((Caller(name: "session of a revoked key", secret: revokedLater, scope: .read, live: false), revokedSession))
            try await Self.dashboard(routes, sessions)
            // A session past its 12 hours is no session.
            harness.clock.advance(by: 12 * 3_600 + 1)
            try await Self.dashboard(routes, [(Caller(name: "expired session", secret: nil, scope: nil), expiring)])
        }
    }

    struct Route: Sendable {
        var method: HTTPMethod
        var pattern: String
        var path: String
        var need: Need
    }

    /// The router's routes, each with its need and a concrete path on app `expenses`.
    static func routes(of harness: Harness) throws -> [Route] {
        let parts = try ApplicationParts(harness.configuration())
        return try parts.routes.map { route in
            let segments = route.path.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
            let pattern = "\(route.method.rawValue) /" + segments.joined(separator: "/")
            let need = try #require(needs[pattern], "\(pattern) has no entry in the authorization matrix")
            let path = pattern.split(separator: " ")[1]
                .replacingOccurrences(of: "{app}", with: "expenses").replacingOccurrences(of: "{platform}", with: "ios")
                .replacingOccurrences(of: "{version}", with: "1.0").replacingOccurrences(of: "{country}", with: "us")
                .replacingOccurrences(of: "{install}", with: "da620824-1c1b-48be-b9cf-c5f90cc5b398")
                .replacingOccurrences(of: "{erasure}", with: "0b7d2f4e-51c3-4f0e-9a8b-2d6c1e5f7a90")
            return Route(method: HTTPMethod(rawValue: route.method.rawValue), pattern: pattern, path: path, need: need)
        }
        // Sign-out ends the session it is sent with: last.
        .sorted { ($0.need == .session ? 1 : 0, $0.pattern) < ($1.need == .session ? 1 : 0, $1.pattern) }
    }

    /// Every dashboard route for each session: a page's refusal is a page, a missing session the sign-in.
    static func dashboard(_ routes: [Route], _ sessions: [(Caller, DashboardTests.Browser)]) async throws {
        for route in routes where route.pattern.contains(" /dashboard") {
            for (caller, browser) in sessions {
                let context = "\(route.pattern) as \(caller.name)"
                let reply: Server.Reply
                if route.method == .POST {
                    // The session's own CSRF token, so that only the rule decides.
                    let csrf = caller.live && caller.scope != nil ? (try? await browser.csrf()) ?? "" : ""
                    reply = try await browser.post(route.path, ["csrf": csrf])
                } else {
                    reply = try await browser.get(route.path)
                }
                let refusal = route.need == .session ? (caller.live && caller.scope != nil ? nil : 401) : caller.refusal(route.need)
                switch refusal {
                case 401 where route.method == .GET:
                    #expect(reply.status == 303 && reply.headers["Location"].first == "/dashboard", "\(context): \(reply.status)")
                case 401?, 403?:
                    expect(reply, for: refusal, context)
                    #expect(reply.headers["Content-Type"].first?.hasPrefix("text/html") == true, "\(context)")
                default:
                    expect(reply, for: nil, context)
                }
            }
        }
    }

    static func expect(_ reply: Server.Reply, for refusal: Int?, _ context: String) {
        if let refusal {
            #expect(reply.status == refusal, "\(context): \(reply.status) \(reply.text.prefix(160))")
        } else {
            #expect(![401, 403].contains(reply.status), "\(context): \(reply.status) \(reply.text.prefix(160))")
            #expect(reply.status < 500, "\(context): \(reply.status) \(reply.text.prefix(160))")
        }
    }
}
