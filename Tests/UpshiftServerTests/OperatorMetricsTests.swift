import Foundation
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// Every metric that docs/grafana-dashboard.json graphs is served at `/metrics` and moves: one request of
/// each kind, a projection held mid-batch (its lag), and a stalled database (the writer's queue, failed
/// flushes, dropped observations, pool refusals).
@Suite(.tags(.timed), .serverTimeLimit) struct OperatorMetricsTests {
    /// The metric names the dashboard's queries use (`upshift_…`, histograms by their series names).
    static func dashboardMetrics() throws -> Set<String> {
        let file = TestEnvironment.packageRoot.appendingPathComponent("docs/grafana-dashboard.json")
        let dashboard = try JSONSerialization.jsonObject(with: Data(contentsOf: file)) as? [String: Any]
        let panels = dashboard?["panels"] as? [[String: Any]] ?? []
        var names = Set<String>()
        for panel in panels {
            for target in panel["targets"] as? [[String: Any]] ?? [] {
                let expression = target["expr"] as? String ?? ""
                for match in expression.matches(of: /upshift_[a-z0-9_]+/) { names.insert(String(match.output)) }
            }
        }
        return names
    }

    /// The metric names of a `/metrics` text with a sample above zero.
    static func nonZero(in text: String) -> Set<String> {
        var names = Set<String>()
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]), value > 0
            else { continue }
            let series = line[..<space]
            names.insert(String(series.prefix { $0 != "{" && $0 != " " }))
        }
        return names
    }

    /// Holds projection batches before their commit while closed.
    final class Gate: Sendable {
        let closed = Mutex(false)
        func wait() async throws {
            while closed.withLock({ $0 }) { try await Task.sleep(for: .milliseconds(20)) }
        }
    }

    @Test func everyMetricOfTheGrafanaDashboardIsServedAndMoves() async throws {
        let expected = try Self.dashboardMetrics()
        #expect(expected.count >= 14, "\(expected.sorted())")
        let harness = try await Harness.make()
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        let gate = Gate()
        var configuration = harness.configuration()
        configuration.database.port = proxy.port
        // Bounds that pass within the test once the database stalls, and that a loaded machine does
        // not reach before (a report, a flush with other suites beside it).
        configuration.ingestion.flushTimeout = .seconds(5)
        configuration.pools.waitTimeout = .seconds(5)
        configuration.pools.reportStatementTimeout = .seconds(5)
        configuration.check.ratePerClient = RateLimit(rate: 0.001, burst: 4)
        configuration.trustedProxies = ["127.0.0.1"]
        configuration.projections.beforeCommit = { _ in try await gate.wait() }
        let now = harness.clock.now()
        let seen = Mutex(Set<String>())

        try await harness.run(configuration) { server in
            @Sendable func scrape() async throws -> Set<String> {
                let names = Self.nonZero(in: try await server.request(.GET, "/metrics").text)
                seen.withLock { $0.formUnion(names) }
                return names
            }
            try await harness.waitForProjections()
            // One request of each kind.
            #expect(try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status == 200)
            let check = "/v1/apps/expenses/check?platform=ios&version=1.0&install=\(UUID().uuidString)"
            #expect(try await server.request(.GET, check).status == 200)
            #expect(try await server.send(.GET, HotPathTests.adoption, key: harness.readKey).status == 200)
            #expect(try await server.send(.GET, "/v1/apps/expenses/releases", key: harness.adminKey).status == 200)
            #expect(try await server.request(.GET, "/dashboard").status == 200)
            _ = try await scrape()

            // A projection read events and is held before its commit: it lags.
            gate.closed.withLock { $0 = true }
            #expect(try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status == 200)
            try await Waits.until("a lagging projection on /metrics", timeout: .seconds(30), every: .milliseconds(100)) {
                try await scrape().contains("upshift_projection_lag_events")
            }
            gate.closed.withLock { $0 = false }

            // The database stops answering: posts queue behind the writer's busy flushers and fail, the
            // observation of a check is dropped, a report is refused by its pool.
            try await harness.waitForProjections()
            proxy.stall()
            // One post for each of the writer's three flushers (each then waits on the database), then
            // three that queue behind them (the test's HTTP client keeps two of its eight connections to
            // a host for the check and the scrapes).
            var posts: [Task<Int, any Error>] = []
            for index in 0..<6 {
                posts.append(Task { try await server.postEvents([clientEvent(occurredAt: now)], key: harness.ingestKey).status })
                if index < 3 { try await Task.sleep(for: .milliseconds(100)) }
            }
            // Posts that reach the server together share one flush, which can leave flushers idle. Checks
            // with installs, each from a client of its own behind the trusted proxy (their limit is per
            // client), are answered at once and hand the writer one observation each: the first ones
            // take whatever flusher is idle, and wait on the database with it; the next ones queue.
            var client = 0
            func checkFromANewClient() async throws {
                client += 1
                let stalled = "/v1/apps/expenses/check?platform=ios&version=1.0&install=\(UUID().uuidString)"
                let reply = try await server.request(.GET, stalled, headers: [("X-Forwarded-For", "10.1.\(client / 250).\(client % 250)")])
                #expect(reply.status == 200)
            }
            let queueDeadline = ContinuousClock.now.advanced(by: .seconds(15))
            while !(try await scrape()).contains("upshift_ingest_queue_events"), ContinuousClock.now < queueDeadline {
                try await checkFromANewClient()
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(try await server.send(.GET, HotPathTests.adoption, key: harness.readKey).status == 503)
            for post in posts { #expect(try await post.value == 503) }
            // Observations that queued may still be written once the database answers again; while it
            // stalls, the next ones fail with a flush or are refused during the writer's fail-fast.
            let dropDeadline = ContinuousClock.now.advanced(by: .seconds(20))
            while !(try await scrape()).contains("upshift_check_observations_dropped_total"), ContinuousClock.now < dropDeadline {
                try await checkFromANewClient()
                try await Task.sleep(for: .milliseconds(200))
            }
            proxy.restore()

            // Checks from one address past its burst of 4 (one was answered above).
            var refused = false
            for _ in 0..<6 where !refused {
                refused = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0").status == 429
            }
            #expect(refused)
            _ = try await scrape()
        }
        await proxy.stop()
        let missing = expected.subtracting(seen.withLock { $0 })
        #expect(missing.isEmpty, "dashboard metrics never above zero: \(missing.sorted())")
    }

    /// Request durations are labelled by the route's pattern, the method and the status: never by the
    /// raw path, an app id or anything else a client chooses (each would be a new series: an attacker
    /// could grow `/metrics` without bound). A path no route matches is `unmatched`, a method the router
    /// does not answer `other`.
    @Test func requestDurationsAreLabelledByRoutePatternsNeverByWhatAClientSent() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let chosen = "zq\(UInt32.random(in: 100_000...999_999))"
            #expect(try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0&\(chosen)=1").status == 200)
            #expect(try await server.request(.GET, "/v1/apps/\(chosen)-app/check?platform=ios&version=1.0").status == 404)
            #expect(try await server.request(.GET, "/v1/\(chosen)/anything").status == 404)
            // A method HTTP knows and the router does not answer (one it does not know at all is refused
            // by the HTTP parser before any route: `400`).
            #expect(try await server.request(.PROPFIND, "/v1/apps/expenses/check?platform=ios&version=1.0").status == 405)
            let text = try await server.request(.GET, "/metrics").text
            let series = text.split(separator: "\n").filter { $0.hasPrefix("upshift_http_request_duration_seconds") }
            #expect(!series.isEmpty)
            let leaked = series.filter { $0.lowercased().contains(chosen) || $0.contains("expenses") }
            #expect(leaked.isEmpty, "series naming what a client sent: \(leaked.prefix(3))")
            let routes = Set(series.compactMap { line -> String? in
                guard let start = line.range(of: "route=\"") else { return nil }
                return String(line[start.upperBound...].prefix { $0 != "\"" })
            })
            #expect(routes.contains("/v1/apps/{app}/check"), "\(routes.sorted())")
            #expect(routes.contains("unmatched"), "\(routes.sorted())")
            #expect(routes.allSatisfy { $0 == "unmatched" || $0.hasPrefix("/") }, "\(routes.sorted())")
            #expect(series.contains { $0.contains("method=\"other\"") }, "a method the router does not know is `other`")
        }
    }

    /// With an operator token, `/metrics` and `/health/db` answer its bearer only; the probes a load
    /// balancer uses stay open.
    @Test func theOperatorTokenGuardsMetricsAndTheDatabaseProbe() async throws {
        let harness = try await Harness.make()
        var configuration = harness.configuration()
        let token = "op-" + KeySecret.randomToken()
        configuration.operatorToken = token
        try await harness.run(configuration) { server in
            for path in ["/metrics", "/health/db"] {
                for header in [nil, "Bearer wrong", "Bearer \(token)x", "Basic \(token)", token] {
                    let reply = try await server.request(.GET, path, headers: header.map { [("Authorization", $0)] } ?? [])
                    #expect(reply.status == 401, "\(path) with \(header ?? "no header")")
                    #expect(reply.headers["Content-Type"].first == "application/problem+json")
                    #expect(!reply.text.contains("upshift_"))
                }
                let allowed = try await server.request(.GET, path, headers: [("Authorization", "bearer \(token)")])
                #expect(allowed.status == 200, "\(path)")
            }
            let metrics = try await server.request(.GET, "/metrics", headers: [("Authorization", "Bearer \(token)")])
            #expect(metrics.text.contains("upshift_http_request_duration_seconds"))
            for path in ["/health/live", "/health/ready", "/openapi.yaml"] {
                #expect(try await server.request(.GET, path).status == 200, "\(path)")
            }
        }
    }
}
