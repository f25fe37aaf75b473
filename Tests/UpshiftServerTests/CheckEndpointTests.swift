import Foundation
import NIOHTTP1
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftTestData
import UpshiftTestSupport

/// `decisions.json` through the real server: each scenario in a fresh database, its catalog loaded
/// through the admin API, the server's clock at the scenario's `now`.
@Suite(.serverTimeLimit) struct CheckEndpointTests {
    static let cases = Result { try DecisionCases.load() }

    /// Loads a scenario's app, releases and policy through the admin API.
    static func load(_ scenario: DecisionCases.Scenario, into server: Server, key: String) async throws {
        let app: JSONValue = .object([
            "id": .string(scenario.app.id), "name": .string(scenario.name),
            "defaultLocale": .string(scenario.app.defaultLocale),
            "updateURL": .object(scenario.app.updateURL.mapValues(JSONValue.string)),
        ])
        let created = try await server.send(.POST, "/v1/apps", key: key, json: app)
        #expect(created.status == 201, "\(created.text)")
        var platforms = Set(scenario.app.updateURL.keys)
        for release in scenario.releases {
            let reply = try await server.send(.POST, "/v1/apps/\(scenario.app.id)/releases", key: key, json: release)
            #expect(reply.status == 201, "\(scenario.name): \(reply.text)")
            if let platform = release["platform"]?.stringValue { platforms.insert(platform) }
        }
        for platform in platforms {
            let reply = try await server.send(
                .PUT, "/v1/apps/\(scenario.app.id)/policies/\(platform)", key: key, json: scenario.policy,
                headers: [("If-Match", "\"0\"")])
            #expect(reply.status == 200, "\(scenario.name): \(reply.text)")
        }
    }

    static func query(_ fields: [String: String]) -> String {
        var components = URLComponents()
        components.queryItems = fields.sorted { $0.key < $1.key }.map { URLQueryItem(name: $0.key, value: $0.value) }
        return components.percentEncodedQuery?.replacingOccurrences(of: "+", with: "%2B") ?? ""
    }

    /// One server per scenario, one scenario at a time: each starts a server of its own.
    @Test(.serialized, arguments: try DecisionCases.load().scenarios)
    func everyScenarioThroughHTTP(_ scenario: DecisionCases.Scenario) async throws {
        let now = try #require(Timestamp.parse(scenario.now))
        let harness = try await Harness.empty(now: now)
        try await harness.run { server in
            try await Self.load(scenario, into: server, key: harness.rootKey)
            for check in scenario.checks {
                let reply = try await server.request(.GET, "/v1/apps/\(scenario.app.id)/check?\(Self.query(check.request))")
                #expect(reply.status == 200, "\(reply.text)")
                let actual = try reply.value()
                for (field, expected) in check.expect {
                    #expect(actual[field] == expected, "\(check.request): \(field) is \(actual[field] ?? .null), expected \(expected)")
                }
                if check.request["previous"] != nil {
                    #expect(actual["whatsNew"] != nil, "whatsNew must be present")
                }
            }
        }
    }

    @Test func bucketCasesThroughHTTP() async throws {
        let rows = try Self.cases.get().buckets.cases
        let groups = Dictionary(grouping: rows) { "\($0[0].stringValue ?? "")|\($0[1].stringValue ?? "")" }
        for (_, cases) in groups {
            let appId = try #require(cases[0][0].stringValue)
            let version = try #require(cases[0][1].stringValue)
            let harness = try await Harness.empty(now: Timestamp.parse("2026-06-01T00:00:00Z")!)
            try await harness.run { server in
                let key = harness.rootKey
                _ = try await server.send(.POST, "/v1/apps", key: key, json: .object(["id": .string(appId), "name": .string(appId)]))
                for (text, percent) in [("1.0", 100.0), (version, 0.0)] {
                    let release: JSONValue = .object([
                        "platform": .string("ios"), "version": .string(text), "releasedAt": .string("2026-01-01T00:00:00Z"),
                        "rolloutPercent": .number(JSONNumber(percent)),
                    ])
                    #expect(try await server.send(.POST, "/v1/apps/\(appId)/releases", key: key, json: release).status == 201)
                }
                var revision = 1
                for row in cases {
                    let install = try #require(row[2].stringValue)
                    guard case .number(let number) = row[3], let bucket = number.integer(in: 0...9_999) else { continue }
                    // Admitted exactly when bucket < percent × 100: test both sides of the boundary.
                    for (percent, admitted) in [(Double(bucket) / 100, false), (Double(bucket + 1) / 100, true)] {
                        let patch = try await server.send(
                            .PATCH, "/v1/apps/\(appId)/releases/ios/\(version)", key: key,
                            json: .object(["rolloutPercent": .number(JSONNumber(percent))]),
                            headers: [("If-Match", "\"\(revision)\"")])
                        #expect(patch.status == 200)
                        revision += 1
                        let reply = try await server.request(.GET, "/v1/apps/\(appId)/check?platform=ios&version=1.0&install=\(install)")
                        let decision = try reply.value()
                        #expect(decision["action"] == .string(admitted ? "soft" : "none"), "\(row) at \(percent)%")
                        #expect(decision["reason"] == .string(admitted ? "update_available" : "not_in_rollout"), "\(row)")
                    }
                }
            }
        }
    }

    @Test func everyPresentParameterMustParse() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let base = "/v1/apps/expenses/check"
            let cases: [(String, String?)] = [
                ("?version=1.0", "platform"), ("?platform=ios", "version"), ("?platform=ios&version=v1", "version"),
                ("?platform=ios&version=1.0&os=seventeen", "os"), ("?platform=ios&version=1.0&install=abc", "install"),
                ("?platform=ios&version=1.0&build=-2", "build"), ("?platform=ios&version=1.0&channel=nightly", "channel"),
                ("?platform=ios&version=1.0&locale=%20", "locale"), ("?platform=ios&version=1.0&previous=1..2", "previous"),
                ("?platform=IOS&version=1.0", "platform"),
            ]
            for (query, field) in cases {
                let reply = try await server.request(.GET, base + query)
                #expect(reply.status == 400, "\(query)")
                #expect(reply.headers["Content-Type"].first == "application/problem+json")
                #expect(try reply.value()["field"] == field.map(JSONValue.string), "\(query)")
            }
            #expect(try await server.request(.GET, "/v1/apps/nope/check?platform=ios&version=1.0").status == 404)
            let ok = try await server.request(.GET, base + "?platform=ios&version=1.0&unknown=ignored")
            #expect(ok.status == 200)
            #expect(try ok.value()["reason"] == .string("up_to_date"))
        }
    }

    @Test func etagAndCacheControlAnd304() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let path = "/v1/apps/expenses/check?platform=ios&version=1.0"
            let first = try await server.request(.GET, path)
            let etag = try #require(first.etag)
            #expect(first.headers["Cache-Control"].first == "private, max-age=86400")
            let again = try await server.request(.GET, path, headers: [("If-None-Match", etag)])
            #expect(again.status == 304)
            #expect(again.body.isEmpty)
            let other = try await server.request(.GET, path, headers: [("If-None-Match", "\"other\"")])
            #expect(other.status == 200)
            // A catalog change changes the answer and so the ETag.
            let policy = try await server.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                json: .object(["enabled": .bool(false)]), headers: [("If-Match", "\"0\"")])
            #expect(policy.status == 200)
            let changed = try await server.request(.GET, path, headers: [("If-None-Match", etag)])
            #expect(changed.status == 200)
            #expect(try changed.value()["reason"] == .string("disabled"))
        }
    }

    /// Answers are reused within a snapshot, but the clock still moves them: a release that comes out,
    /// or becomes old enough to prompt for, changes the answer with no catalog write in between.
    @Test func answersFollowTheClockAcrossReleaseAndNotifyBoundaries() async throws {
        let start = Timestamp.parse("2026-05-01T00:00:00Z")!
        let harness = try await Harness.make(now: start)
        try await harness.run { (server: Server) async throws in
            let release: JSONValue = .object([
                "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-05-02T00:00:00Z"),
            ])
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release).status == 201)
            #expect(try await server.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                json: .object(["enabled": .bool(true), "notifyAfterDays": .number(3)]), headers: [("If-Match", "\"0\"")]).status == 200)
            let path = "/v1/apps/expenses/check?platform=ios&version=1.0"
            func reason() async throws -> JSONValue? { try await server.request(.GET, path).value()["reason"] }
            #expect(try await reason() == .string("up_to_date"))  // not out yet
            #expect(try await reason() == .string("up_to_date"))  // the same answer, reused
            harness.clock.set(Timestamp.parse("2026-05-02T00:00:00Z")!)
            #expect(try await reason() == .string("too_recent"))  // out, but younger than 3 days
            harness.clock.set(Timestamp.parse("2026-05-04T23:59:59Z")!)
            #expect(try await reason() == .string("too_recent"))
            harness.clock.set(Timestamp.parse("2026-05-05T00:00:00Z")!)
            #expect(try await reason() == .string("update_available"))
            harness.clock.set(start)  // a clock that goes back is answered for its own time
            #expect(try await reason() == .string("up_to_date"))
        }
    }

    @Test func postTakesTheSameFieldsAsJSON() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let reply = try await server.send(
                .POST, "/v1/apps/expenses/check", key: nil,
                json: .object(["platform": .string("ios"), "version": .string("1.0"), "build": .number(12)]))
            #expect(reply.status == 200)
            #expect(try reply.value()["installedVersion"] == .string("1.0"))
            let bad = try await server.send(
                .POST, "/v1/apps/expenses/check", key: nil, json: .object(["platform": .string("ios"), "version": .string("x")]))
            #expect(bad.status == 400)
            #expect(try bad.value()["field"] == .string("version"))
        }
    }

    @Test func aPerClientRateLimitAnswers429WithRetryAfter() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        // One token per 100 s: however slowly this machine runs the test, a burst of 5 is all there is.
        configuration.check.ratePerClient = RateLimit(rate: 0.01, burst: 5)
        configuration.trustedProxies = ["127.0.0.1"]
        try await harness.run(configuration) { server in
            let path = "/v1/apps/expenses/check?platform=ios&version=1.0"
            var statuses: [Int] = []
            for _ in 0..<8 {
                statuses.append(try await server.request(.GET, path, headers: [("X-Forwarded-For", "203.0.113.7")]).status)
            }
            #expect(statuses.prefix(5).allSatisfy { $0 == 200 })
            #expect(statuses.last == 429)
            let limited = try await server.request(.GET, path, headers: [("X-Forwarded-For", "203.0.113.7")])
            #expect(limited.status == 429)
            #expect(limited.headers["Retry-After"].first.flatMap(Int.init).map { $0 >= 1 } == true)
            // Another client behind the same trusted proxy has its own budget.
            #expect(try await server.request(.GET, path, headers: [("X-Forwarded-For", "198.51.100.2")]).status == 200)
        }
    }

    @Test func checksWithAnInstallAreObservedAsCheckedEvents() async throws {
        let harness = try await Harness.make()
        let install = UUID()
        try await harness.run { server in
            let reply = try await server.request(
                .GET, "/v1/apps/expenses/check?platform=ios&version=1.0&os=17.4&locale=de_AT&install=\(install.uuidString)")
            #expect(reply.status == 200)
            // The observation is written by the group-commit writer shortly after the answer.
            try? await Waits.until("the observation stored", timeout: .seconds(5), every: .milliseconds(20)) {
                try await harness.count("SELECT count(*)::int FROM event_log WHERE type = 'checked'") > 0
            }
        }
        let row = try await harness.sql { client -> (UUID, String, String, String, String, String)? in
            for try await row in try await client.query(
                """
                SELECT install_id, app_version, data->>'action', data->>'reason', data->>'osVersion', data->>'locale'
                FROM event_log WHERE type = 'checked'
                """
            ).decode((UUID, String, String, String, String, String).self) { return row }
            return nil
        }
        let observed = try #require(row)
        #expect(observed.0 == install)
        #expect(observed.1 == "1.0")
        #expect(observed.2 == "none")
        #expect(observed.3 == "up_to_date")
        #expect(observed.4 == "17.4")
        #expect(observed.5 == "de_AT")
    }
}
