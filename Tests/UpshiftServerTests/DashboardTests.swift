import Foundation
import NIOHTTP1
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

/// The dashboard over real HTTP on a real database: sessions, who sees and may change what, CSRF,
/// stale forms. (The browser flow is `Tests/e2e/dashboard_e2e.py`.)
@Suite(.serverTimeLimit) struct DashboardTests {
    /// A browser's view of the dashboard: one session cookie.
    struct Browser {
        let server: Server
        var cookie: String?

        func get(_ path: String) async throws -> Server.Reply {
            try await server.request(.GET, path, headers: cookie.map { [("Cookie", $0)] } ?? [], followRedirects: false)
        }

        func post(_ path: String, _ fields: [String: String], origin: String? = nil) async throws -> Server.Reply {
            var headers = [("Content-Type", "application/x-www-form-urlencoded")]
            if let cookie { headers.append(("Cookie", cookie)) }
            if let origin { headers.append(("Origin", origin)) }
            let body = fields.map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? "")" }
                .joined(separator: "&")
            return try await server.request(.POST, path, headers: headers, body: Data(body.utf8), followRedirects: false)
        }

        /// Signs in; the cookie of the answer is kept.
        mutating func signIn(_ token: String) async throws -> Server.Reply {
            let reply = try await post("/dashboard/sign-in", ["token": token])
            if let header = reply.headers["Set-Cookie"].first { cookie = String(header.prefix { $0 != ";" }) }
            return reply
        }

        /// The CSRF token the forms of a page carry.
        func csrf(_ path: String = "/dashboard") async throws -> String {
            let page = try await get(path)
            guard let match = page.text.firstMatch(of: /name="csrf" value="([^"]+)"/) else {
                throw HarnessError("no CSRF token on \(path)")
            }
            return String(match.1)
        }
    }

    static func release(_ version: String, minimumOS: String = "15.0") -> JSONValue {
        .object([
            "platform": .string("ios"), "version": .string(version), "releasedAt": .string("2026-01-01T00:00:00Z"),
            "minimumOSVersion": .string(minimumOS),
        ])
    }

    @Test func signInGivesAStrictHttpOnlyCookieValidOnEveryInstanceUntilSignOut() async throws {
        let harness = try await Harness.make()
        let cookie = try await harness.run { server in
            var browser = Browser(server: server)
            // The address typed alone leads to the dashboard; its sign-in page says where a first token is.
            let root = try await browser.get("/")
            #expect(root.status == 303 && root.headers["Location"].first == "/dashboard")
            let page = try await browser.get("/dashboard")
            #expect(page.status == 200 && page.text.contains("name=\"token\""))
            #expect(page.text.contains("<code>scripts/run</code> printed one of each in its box of keys"))

            for wrong in ["upshift_read_nonsense", harness.ingestKey, ""] {
                let refused = try await browser.post("/dashboard/sign-in", ["token": wrong])
                #expect(refused.status == 401)
                #expect(refused.headers["Set-Cookie"].isEmpty)
            }
            let signedIn = try await browser.signIn(harness.readKey)
            #expect(signedIn.status == 303)
            let cookie = try #require(signedIn.headers["Set-Cookie"].first)
            #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Max-Age=43200"))
            #expect(!cookie.contains(harness.readKey) && !cookie.contains("Secure"))
            // Behind a proxy that terminated HTTPS the cookie is kept off plain HTTP.
            let behindTLS = try await server.request(
                .POST, "/dashboard/sign-in",
                headers: [("Content-Type", "application/x-www-form-urlencoded"), ("X-Forwarded-Proto", "https")],
                body: Data("token=\(harness.readKey)".utf8), followRedirects: false)
            let attributes = behindTLS.headers["Set-Cookie"].first?.split(separator: ";").map { $0.trimmingCharacters(in: .whitespaces) }
            #expect(attributes?.contains("Secure") == true)
            let home = try await browser.get("/dashboard")
            #expect(home.text.contains("/dashboard/apps/expenses"))
            return browser.cookie
        }
        // Another instance (a new application on the same database) knows the session.
        try await harness.run { server in
            let browser = Browser(server: server, cookie: cookie)
            #expect(try await browser.get("/dashboard/apps/expenses/history").status == 200)
            let out = try await browser.post("/dashboard/sign-out", ["csrf": try await browser.csrf()])
            #expect(out.status == 303)
            #expect(out.headers["Set-Cookie"].first?.contains("Max-Age=0") == true)
            // The old cookie no longer opens anything.
            let after = try await browser.get("/dashboard/apps/expenses")
            #expect(after.status == 303 && after.headers["Location"].first == "/dashboard")
        }
    }

    @Test func aRevokedKeyOrAnExpiredSessionEndsIt() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            var browser = Browser(server: server)
            _ = try await browser.signIn(harness.readKey)
            #expect(try await browser.get("/dashboard/apps/expenses/history").status == 200)
            try await harness.sql { client in
                _ = try await KeyStore(client: client, logger: TestEnvironment.logger).revoke("reports", now: Date())
            }
            #expect(try await browser.get("/dashboard/apps/expenses/history").status == 303)

            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            #expect(try await admin.get("/dashboard/apps/expenses/history").status == 200)
            harness.clock.advance(by: 12 * 3_600 + 1)
            #expect(try await admin.get("/dashboard/apps/expenses/history").status == 303)
        }
    }

    @Test func readTokensSeeReportsButNoControlsAndTheirPostsAreRefused() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release("2.0"))
            var reader = Browser(server: server)
            _ = try await reader.signIn(harness.readKey)
            let overview = try await reader.get("/dashboard/apps/expenses?platform=ios")
            #expect(overview.status == 200)
            #expect(overview.text.contains("<svg class=\"chart\""))
            #expect(overview.text.contains("2.0.0"))
            #expect(!overview.text.contains("method=\"post\" action=\"/dashboard/apps"))
            #expect(!overview.text.contains("/rollout"))
            #expect(try await reader.get("/dashboard/apps/expenses/rollout?platform=ios").status == 403)
            // Not even with the session's own CSRF token.
            let csrf = try await reader.csrf()
            let forged = try await reader.post(
                "/dashboard/apps/expenses/minimum",
                ["csrf": csrf, "platform": "ios", "revision": "0", "minimumVersion": "2.0", "reason": "forged"])
            #expect(forged.status == 403)

            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let fields = ["platform": "ios", "revision": "0", "minimumVersion": "2.0", "reason": "raise"]
            #expect(try await admin.post("/dashboard/apps/expenses/minimum", fields).status == 403)  // no CSRF token
            #expect(try await admin.post("/dashboard/apps/expenses/minimum", fields.merging(["csrf": "guess"]) { $1 }).status == 403)
            let token = try await admin.csrf()
            let crossSite = try await admin.post(
                "/dashboard/apps/expenses/minimum", fields.merging(["csrf": token]) { $1 }, origin: "https://evil.example")
            #expect(crossSite.status == 403)
            // Nothing of that changed the policy.
            let policy = try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: harness.readKey)
            #expect(policy.etag == "\"0\"")
        }
    }

    @Test func aRaisedMinimumForcesAtOnceAndAStaleFormSaysSo() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release("2.0"))
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            try await harness.waitForProjections()
            let preview = try await admin.get("/dashboard/apps/expenses/rollout?platform=ios&candidate=2.0&window=7")
            #expect(preview.status == 200, "\(preview.text)")
            #expect(preview.text.contains("Apply minimum 2.0"))
            let csrf = try await admin.csrf()
            let apply = ["csrf": csrf, "platform": "ios", "revision": "0", "minimumVersion": "2.0.0"]
            #expect(try await admin.post("/dashboard/apps/expenses/minimum", apply).status == 400)  // a reason is required
            let applied = try await admin.post("/dashboard/apps/expenses/minimum", apply.merging(["reason": "crash in 1.x <sync>"]) { $1 })
            #expect(applied.status == 303)
            let check = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0&os=17.0")
            #expect(try check.json()["action"] as? String == "force")

            // The same form again: the policy moved on, nothing is overwritten.
            let stale = try await admin.post("/dashboard/apps/expenses/minimum", apply.merging(["reason": "again", "minimumVersion": "1.5"]) { $1 })
            #expect(stale.status == 412)
            #expect(stale.text.contains("Someone changed this since you loaded the form"))
            let policy = try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: harness.readKey)
            #expect(try policy.json()["minimumVersion"] as? String == "2.0.0")

            // The history names who, what and why, and shows what was typed as text.
            let history = try await admin.get("/dashboard/apps/expenses/history")
            #expect(history.text.contains("crash in 1.x &lt;sync&gt;"))
            #expect(history.text.contains("owner ("))
            #expect(history.text.contains("<b>minimumVersion</b>: none → 2.0.0"))
        }
    }

    /// The settings page edits the app as `PATCH /v1/apps/{app}` does, at the revision it showed.
    @Test func theSettingsPageEditsTheAppAndAStaleFormSaysSo() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let page = try await admin.get("/dashboard/apps/expenses/settings")
            #expect(page.status == 200 && page.text.contains("name=\"revision\" value=\"1\""), "\(page.text)")
            var reader = Browser(server: server)
            _ = try await reader.signIn(harness.readKey)
            #expect(try await reader.get("/dashboard/apps/expenses/settings").status == 403)
            let csrf = try await admin.csrf("/dashboard/apps/expenses/settings")
            let form = [
                "csrf": csrf, "revision": "1", "name": "Expenses & Co", "defaultLocale": "en", "reason": "store ids",
                "platform.0": "ios", "updateURL.0": "https://apps.apple.com/app/id1", "storeId.0": "1", "bundleId.0": "com.example.expenses",
                "platform.1": "android", "updateURL.1": "", "storeId.1": "", "bundleId.1": "",
            ]
            let saved = try await admin.post("/dashboard/apps/expenses/settings", form)
            #expect(saved.status == 200 && saved.text.contains("Saved."), "\(saved.text)")
            let app = try await server.send(.GET, "/v1/apps/expenses", key: harness.readKey)
            #expect(app.etag == "\"2\"")
            #expect(try app.value()["name"] == "Expenses & Co")
            #expect(try app.value()["bundleId"] == .object(["ios": "com.example.expenses"]))
            // The same form again: the app moved on to revision 2, nothing is overwritten.
            let stale = try await admin.post("/dashboard/apps/expenses/settings", form.merging(["name": "Other"]) { $1 })
            #expect(stale.status == 412)
            #expect(stale.text.contains("Someone changed this since you loaded the form"))
            #expect(try await server.send(.GET, "/v1/apps/expenses", key: harness.readKey).value()["name"] == "Expenses & Co")
            let history = try await admin.get("/dashboard/apps/expenses/history")
            #expect(history.text.contains("app updated") && history.text.contains("store ids"))
        }
    }

    /// The webhooks page: an admin makes a subscription (its secret shown once, never again), sends it a test
    /// event that the receiver gets signed with that secret, sees the attempt listed with its status, and
    /// removes it; a bad form says which field; a read token gets no page.
    @Test func theWebhooksPageMakesTestsListsAndRemovesASubscription() async throws {
        let harness = try await Harness.make()
        let names = WebhookTests.Names()
        try await WebhookReceiver.run { receiver in
            names.set("hooks.example.test", ["127.0.0.1"])
            try await harness.run(WebhookTests.configuration(harness, names: names, allowPrivate: true)) { server in
                var admin = Browser(server: server)
                _ = try await admin.signIn(harness.adminKey)
                var reader = Browser(server: server)
                _ = try await reader.signIn(harness.readKey)
                #expect(try await reader.get("/dashboard/apps/expenses/webhooks").status == 403)
                let empty = try await admin.get("/dashboard/apps/expenses/webhooks")
                #expect(empty.status == 200 && empty.text.contains("No webhook yet."), "\(empty.text)")
                #expect(try await admin.get("/dashboard/apps/expenses").text.contains("href=\"/dashboard/apps/expenses/webhooks\""))
                let csrf = try await admin.csrf("/dashboard/apps/expenses/webhooks")
                let url = "http://hooks.example.test:\(receiver.port)/hook"
                for (fields, field) in [
                    (["url": url], "kinds"), (["url": url, "kind.adoption.crossed": "on"], "thresholds"),
                    (["url": url, "kind.adoption.crossed": "on", "thresholds": "50, 1000"], "thresholds"),
                    (["url": url, "kind.release.changed": "on", "format": "xml"], "format"),
                    (["url": "ftp://hooks.example.test/", "kind.release.changed": "on"], "url"),
                ] {
                    let refused = try await admin.post("/dashboard/apps/expenses/webhooks", fields.merging(["csrf": csrf]) { $1 })
                    #expect(refused.status == 400 && refused.text.contains(field), "\(fields): \(refused.text)")
                }
                let created = try await admin.post(
                    "/dashboard/apps/expenses/webhooks",
                    ["csrf": csrf, "url": url, "kind.release.changed": "on", "kind.adoption.crossed": "on", "thresholds": "90 50"])
                #expect(created.status == 200, "\(created.text)")
                let secret = try #require(created.text.firstMatch(of: /<code id="secret">(whsec_[0-9a-f]+)<\/code>/).map { String($0.1) })
                #expect(created.text.contains("release.changed, adoption.crossed at 50 %, 90 %"), "\(created.text)")
                let page = try await admin.get("/dashboard/apps/expenses/webhooks")
                #expect(!page.text.contains(secret), "the secret is shown once")
                let id = try #require(page.text.firstMatch(of: /id="webhook-([0-9a-f-]+)"/).map { String($0.1) })

                let sent = try await admin.post("/dashboard/apps/expenses/webhooks/\(id)/test", ["csrf": csrf])
                #expect(sent.status == 303 && sent.headers["Location"].first == "/dashboard/apps/expenses/webhooks?done=test")
                let got = try await receiver.waitFor(1)[0]
                #expect(try JSONValue.parse(got.body)["kind"] == "webhook.test")
                let stamp = try #require(got.signature?.firstMatch(of: /t=([0-9]+)/).flatMap { Int($0.1) })
                #expect(got.signature?.contains("v1=" + WebhookSignature.sign(body: got.body, at: stamp, secret: secret)) == true)
                try await Waits.until("the attempt listed with its status", timeout: .seconds(60)) {
                    let listed = try await admin.get("/dashboard/apps/expenses/webhooks?done=test")
                    return listed.text.contains("A test event is queued") && listed.text.contains("webhook.test")
                        && listed.text.contains("status 200") && listed.text.contains(">delivered<")
                }

                let removed = try await admin.post("/dashboard/apps/expenses/webhooks/\(id)/remove", ["csrf": csrf])
                #expect(removed.status == 303)
                #expect(try await admin.get("/dashboard/apps/expenses/webhooks").text.contains("No webhook yet."))
                #expect(try await admin.post("/dashboard/apps/expenses/webhooks/\(id)/test", ["csrf": csrf]).status == 404)
                #expect(try await admin.post("/dashboard/apps/expenses/webhooks/\(id)/sideways", ["csrf": csrf]).status == 404)
                #expect(try await admin.post("/dashboard/apps/expenses/webhooks/not-an-id/test", ["csrf": csrf]).status == 400)
                #expect(try await admin.post("/dashboard/apps/expenses/webhooks/\(id)/test", [:]).status == 403, "no CSRF token")
            }
        }
    }

    /// The rules page: an admin previews a rule (what it would do now, recording nothing), saves it as a dry
    /// run, and a stale or bad form says so; a read token sees the rule and no form.
    @Test func theRulesPagePreviewsSavesAndListsRules() async throws {
        let harness = try await Harness.make(now: Timestamp.parse("2026-01-10T00:00:00Z")!)
        try await harness.run { server in
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release("1.0")).status == 201)
            try await harness.waitForProjections()
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let empty = try await admin.get("/dashboard/apps/expenses/rules")
            #expect(empty.status == 200 && empty.text.contains("No rules yet."), "\(empty.text)")
            let csrf = try await admin.csrf("/dashboard/apps/expenses/rules")
            let form = [
                "csrf": csrf, "platform": "ios", "id": "crash-guard", "revision": "0", "state": "live",
                "definition": #"{"kind": "halt_on_health", "mode": "guarded"}"#, "reason": "guard 1.x",
            ]
            let preview = try await admin.post("/dashboard/apps/expenses/rules/preview", form)
            #expect(preview.status == 200)
            #expect(preview.text.contains("What crash-guard would do now"), "\(preview.text)")
            // 1.0 has no release before it: no baseline, never halted.
            #expect(preview.text.contains("crash-guard: no baseline"), "\(preview.text)")
            let off = try await admin.post("/dashboard/apps/expenses/rules/preview", form.merging(["state": "off"]) { $1 })
            #expect(off.text.contains("crash-guard: no baseline"), "a rule previewed off shows what it would record: \(off.text)")
            #expect(try await server.send(.GET, "/v1/apps/expenses/rules", key: harness.readKey).value()["rules"] == .array([]))

            let saved = try await admin.post("/dashboard/apps/expenses/rules", form)
            #expect(saved.status == 303)
            let shown = try await admin.get(saved.headers["Location"].first ?? "")
            #expect(shown.text.contains("<p class=\"notice ok\" role=\"status\">Saved.</p>"), "\(shown.text)")
            let rule = try await server.send(.GET, "/v1/apps/expenses/rules/ios/crash-guard", key: harness.readKey)
            #expect(rule.etag == "\"1\"")
            #expect(try rule.value()["state"] == .string("live"))
            #expect(try await admin.post("/dashboard/apps/expenses/rules", form).status == 412, "the form of revision 0 is stale now")
            let bad = try await admin.post(
                "/dashboard/apps/expenses/rules", form.merging(["revision": "1", "definition": #"{"kind": "raise_minimum"}"#]) { $1 })
            #expect(bad.status == 400 && bad.text.contains("version"), "\(bad.text)")

            var reader = Browser(server: server)
            _ = try await reader.signIn(harness.readKey)
            let listed = try await reader.get("/dashboard/apps/expenses/rules")
            #expect(listed.status == 200 && listed.text.contains("crash-guard") && listed.text.contains("revision 1"))
            #expect(!listed.text.contains("<form method=\"post\" action=\"/dashboard/apps/expenses/rules\""), "no form for a read token")
            let readerCSRF = try await reader.csrf("/dashboard/apps/expenses/rules")
            #expect(try await reader.post("/dashboard/apps/expenses/rules", form.merging(["csrf": readerCSRF]) { $1 }).status == 403)
        }
    }

    /// "Add a release" shows the backtest of the release before its "Add" button, then adds it.
    @Test func aNewReleaseIsBacktestedBeforeItIsAdded() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release("1.0"))
            let install = UUID().uuidString.lowercased()
            let launched = [
                "id": UUID().uuidString, "type": "launched", "installId": install, "platform": "ios", "appVersion": "1.0",
                "osVersion": "17.0", "occurredAt": Timestamp.format(Date().addingTimeInterval(-3_600)),
            ]
            #expect(try await server.postEvents([launched], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let page = try await admin.get("/dashboard/apps/expenses/rollout?platform=ios")
            #expect(page.text.contains("Preview the release") && !page.text.contains("Add the release"))
            let csrf = try await admin.csrf("/dashboard/apps/expenses/rollout?platform=ios")
            let form = [
                "csrf": csrf, "platform": "ios", "revision": "0", "version": "2.0", "releasedAt": "2026-01-02T00:00:00Z",
                "rolloutPercent": "100", "minimumOSVersion": "15.0", "note": "Faster", "reason": "ship 2.0",
            ]
            let preview = try await admin.post("/dashboard/apps/expenses/new-release/preview", form)
            #expect(preview.status == 200, "\(preview.text)")
            #expect(preview.text.contains("What the check would answer: with 2.0 out"))
            #expect(preview.text.contains("<b id=\"backtest-changed\">1</b>"), "the one install would be offered 2.0")
            #expect(preview.text.contains("Add the release"))
            // Nothing was written by the preview.
            #expect(try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: harness.readKey).status == 404)
            let bad = try await admin.post("/dashboard/apps/expenses/new-release/preview", form.merging(["version": "v2"]) { $1 })
            #expect(bad.status == 400 && bad.text.contains("version"))
            let added = try await admin.post("/dashboard/apps/expenses/new-release", form)
            #expect(added.status == 303)
            let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: harness.readKey)
            #expect(release.status == 200)
            #expect(try release.value()["minimumOSVersion"] == "15.0")
            let check = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0&os=17.0").value()
            #expect(check["action"] == "soft" && check["latestVersion"] == "2.0")
        }
    }

    @Test func theRolloutPageBacktestsAReleaseChangeAndAMinimumBeforeApplyingThem() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            var body = Self.release("2.0").objectValue!
            body["rolloutPercent"] = .number(10)
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object(body))
            let events = (0..<40).map { index -> [String: String] in
                [
                    "id": UUID().uuidString, "type": "launched", "installId": UUID().uuidString.lowercased(), "platform": "ios",
                    "appVersion": "1.0", "osVersion": "17.0", "occurredAt": Timestamp.format(Date().addingTimeInterval(-Double(index) * 600)),
                ]
            }
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            // A release change: 40 installs on 1.0, 10 % admitted today; at 100 % every one is offered 2.0.
            let page = try await admin.get("/dashboard/apps/expenses/rollout?platform=ios&release=2.0&action=rollout&percent=100")
            #expect(page.status == 200, "\(page.text)")
            #expect(page.text.contains("What the check would answer: 2.0 to 100 %"))
            #expect(page.text.contains("<th scope=\"row\">soft</th>"))
            let changed = try #require(page.text.firstMatch(of: #/id="backtest-changed">(\d+)</#).map { Int($0.1)! })
            let report = try await server.send(
                .POST, "/v1/apps/expenses/preview?platform=ios", key: harness.readKey,
                json: .object(["releases": .object(["2.0": .object(["rolloutPercent": .number(100)])])])).value()
            #expect(changed == report["changed"]?.intValue && changed > 20, "the page shows the API's backtest: \(changed)")
            #expect(page.text.contains("Apply: 2.0 to 100 %"))
            let csrf = try await admin.csrf()
            let applied = try await admin.post(
                "/dashboard/apps/expenses/releases/2.0",
                ["csrf": csrf, "platform": "ios", "revision": "1", "action": "rollout", "percent": "100", "reason": "backtested"])
            #expect(applied.status == 303)
            // A minimum: the preview shows the backtest beside the impact report.
            let minimum = try await admin.get("/dashboard/apps/expenses/rollout?platform=ios&candidate=2.0&window=7")
            #expect(minimum.text.contains("What the check would answer: minimum 2.0"))
            #expect(minimum.text.contains("<th scope=\"row\">reason below_minimum</th>"))
            // An edited policy: previewed, nothing written, the form shown again with what was typed, and
            // only then a button that saves it.
            #expect(!minimum.text.contains("Save the policy"), "the policy can be saved only once previewed")
            let edited = [
                "csrf": csrf, "platform": "ios", "revision": "0", "enabled": "true", "minimumVersion": "2.0",
                "versionsBehindThreshold": "1", "remindIntervalSeconds": "86400", "checkIntervalSeconds": "86400",
                "reason": "sync bug <1.x>",
            ]
            let previewed = try await admin.post("/dashboard/apps/expenses/policy/preview", edited)
            #expect(previewed.status == 200, "\(previewed.text)")
            #expect(previewed.text.contains("What the check would answer: the policy as edited below"))
            #expect(previewed.text.contains("Save the policy</button>"))
            #expect(previewed.text.contains("value=\"sync bug &lt;1.x&gt;\"") && previewed.text.contains("name=\"minimumVersion\" value=\"2.0.0\""))
            #expect(try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: harness.readKey).etag == "\"0\"", "nothing written")
            let saved = try await admin.post("/dashboard/apps/expenses/policy", edited)
            #expect(saved.status == 303)
            #expect(try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: harness.readKey).json()["minimumVersion"] as? String == "2.0")
        }
    }

    @Test func theOverviewStartsPausesAndEndsASchedule() async throws {
        let now = Timestamp.parse("2026-06-01T00:00:00Z")!
        let harness = try await Harness.make(now: now)
        try await harness.run { server in
            var body = Self.release("2.0").objectValue!
            body["releasedAt"] = .string("2026-06-03T00:00:00Z")  // not out yet: a schedule can start
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object(body))
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let csrf = try await admin.csrf()
            #expect(try await admin.get("/dashboard/apps/expenses?platform=ios").text.contains("App Store schedule</button>"))
            func post(_ action: String, revision: Int) async throws -> Int {
                try await admin.post(
                    "/dashboard/apps/expenses/releases/2.0",
                    ["csrf": csrf, "platform": "ios", "revision": String(revision), "action": action, "reason": "phased"]
                ).status
            }
            #expect(try await post("schedule", revision: 1) == 303)
            var page = try await admin.get("/dashboard/apps/expenses?platform=ios").text
            #expect(page.contains("rolling out to 1%; App Store schedule, step 1 of 7; next: 2% at 2026-06-04 00:00 UTC"), "\(page)")
            #expect(page.contains("Pause schedule</button>"))
            #expect(try await post("pause-schedule", revision: 2) == 303)
            page = try await admin.get("/dashboard/apps/expenses?platform=ios").text
            #expect(page.contains("App Store schedule paused at step 1 of 7; resumes by itself at 2026-07-01 00:00 UTC"))
            #expect(try await post("release", revision: 3) == 303)
            let release = try await server.send(.GET, "/v1/apps/expenses/releases/ios/2.0", key: harness.readKey).value()
            #expect(release["rolloutPercent"] == .number(100) && release["rolloutSchedule"] == nil)
            let history = try await admin.get("/dashboard/apps/expenses/history").text
            #expect(history.contains("rolloutSchedule"))
        }
    }

    @Test func policyAndReleaseFormsGoThroughTheCatalog() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: Self.release("2.0"))
            var admin = Browser(server: server)
            _ = try await admin.signIn(harness.adminKey)
            let csrf = try await admin.csrf()
            let rollout = try await admin.post(
                "/dashboard/apps/expenses/releases/2.0",
                ["csrf": csrf, "platform": "ios", "revision": "1", "action": "rollout", "percent": "25", "reason": "canary"])
            #expect(rollout.status == 303)
            let paused = try await admin.post(
                "/dashboard/apps/expenses/releases/2.0",
                ["csrf": csrf, "platform": "ios", "revision": "2", "action": "pause", "reason": "crash reports"])
            #expect(paused.status == 303)
            let releases = try await server.send(.GET, "/v1/apps/expenses/releases?platform=ios", key: harness.readKey)
            let release = try #require((try releases.json()["releases"] as? [[String: Any]])?.first)
            #expect(release["rolloutPercent"] as? Double == 25)
            #expect(release["rolloutPaused"] as? Bool == true)
            #expect(try await admin.get("/dashboard/apps/expenses?platform=ios").text.contains("paused at 25%"))

            let saved = try await admin.post(
                "/dashboard/apps/expenses/policy",
                [
                    "csrf": csrf, "platform": "ios", "revision": "0", "enabled": "true", "targetVersion": "2.0",
                    "blockedVersions": "1.1, 1.2", "remindIntervalSeconds": "3600", "checkIntervalSeconds": "600",
                    "versionsBehindThreshold": "1", "reason": "block the broken builds",
                ])
            #expect(saved.status == 303)
            let policy = try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: harness.readKey).json()
            #expect(policy["blockedVersions"] as? [String] == ["1.1", "1.2"])
            #expect(policy["allowSkip"] as? Bool == false)  // an unticked box
            #expect(policy["remindIntervalSeconds"] as? Int == 3600)
            // A minimum above every live release is said on the overview for as long as it holds.
            #expect(!(try await admin.get("/dashboard/apps/expenses?platform=ios").text.contains("Warning:")))
            let tooHigh = try await admin.post(
                "/dashboard/apps/expenses/policy",
                ["csrf": csrf, "platform": "ios", "revision": "1", "enabled": "true", "minimumVersion": "2.5",
                 "targetVersion": "3.0", "reason": "ahead of the release"])
            #expect(tooHigh.status == 303)
            let warned = try await admin.get("/dashboard/apps/expenses?platform=ios")
            #expect(warned.text.contains("Warning: minimumVersion 2.5 is above every live release on ios"))
            // A preview above the policy's target offers no button that could only fail.
            let preview = try await admin.get("/dashboard/apps/expenses/rollout?platform=ios&candidate=4.0&window=7")
            #expect(preview.status == 200)
            #expect(preview.text.contains("cannot be applied"))
            #expect(!preview.text.contains("Apply minimum 4.0"))
            // A bad field is a page naming it, not a 500.
            let bad = try await admin.post(
                "/dashboard/apps/expenses/policy",
                ["csrf": csrf, "platform": "ios", "revision": "2", "enabled": "true", "minimumVersion": "banana", "reason": "x"])
            #expect(bad.status == 400 && bad.text.contains("minimumVersion"))
        }
    }
}

extension DashboardTests {
    @Test func aTokenForOneAppNeitherSeesNorChangesAnother() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let created = try await server.send(
                .POST, "/v1/apps", key: harness.rootKey, json: .object(["id": .string("travel"), "name": .string("Travel")]))
            #expect(created.status == 201)
            _ = try await server.send(.POST, "/v1/apps/travel/releases", key: harness.rootKey, json: Self.release("2.0"))
            var owner = Browser(server: server)  // an admin token of `expenses` only
            _ = try await owner.signIn(harness.adminKey)
            let home = try await owner.get("/dashboard")
            #expect(home.text.contains("/dashboard/apps/expenses"))
            #expect(!home.text.contains("/dashboard/apps/travel"))
            #expect(try await owner.get("/dashboard/apps/travel?platform=ios").status == 403)
            #expect(try await owner.get("/dashboard/apps/travel/history").status == 403)
            let csrf = try await owner.csrf()
            let raise = try await owner.post(
                "/dashboard/apps/travel/minimum",
                ["csrf": csrf, "platform": "ios", "revision": "0", "minimumVersion": "2.0", "reason": "not mine"])
            #expect(raise.status == 403)
            let policy = try await server.send(.GET, "/v1/apps/travel/policies/ios", key: harness.rootKey)
            #expect(policy.etag == "\"0\"")
            // The root token sees both.
            var root = Browser(server: server)
            _ = try await root.signIn(harness.rootKey)
            #expect(try await root.get("/dashboard/apps/travel?platform=ios").status == 200)
        }
    }

    @Test func historyPagesBackToTheAppsCreation() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            // 60 policy changes after the app's creation: 61 entries, two pages of 50.
            for revision in 0..<60 {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                    json: .object(["enabled": .bool(true), "checkIntervalSeconds": .number(JSONNumber(600 + revision)), "reason": .string("step \(revision)")]),
                    headers: [("If-Match", "\"\(revision)\"")])
                #expect(reply.status == 200)
            }
            var reader = Browser(server: server)
            _ = try await reader.signIn(harness.readKey)
            let first = try await reader.get("/dashboard/apps/expenses/history").text
            #expect(first.components(separatedBy: "<tr><td>").count - 1 == 50)
            #expect(first.contains(">step 59<") && !first.contains(">step 9<"))
            let link = try #require(first.firstMatch(of: /href="(\/dashboard\/apps\/expenses\/history\?before=\d+)">Older changes/))
            let second = try await reader.get(String(link.1)).text
            #expect(second.components(separatedBy: "<tr><td>").count - 1 == 11)
            #expect(second.contains(">step 9<") && second.contains(">step 0<") && second.contains("app created"))
            #expect(!second.contains("Older changes"))
            #expect(try await reader.get("/dashboard/apps/expenses/history?before=banana").status == 400)
        }
    }
}
