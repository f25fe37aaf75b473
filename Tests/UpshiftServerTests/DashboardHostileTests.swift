import Foundation
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

@testable import UpshiftServer

/// The dashboard's forms and pages are not in docs/openapi.yaml, so scripts/fuzz does not reach them:
/// every form here gets every kind of bad field, and every page what users typed.
@Suite(.serverTimeLimit) struct DashboardHostileTests {
    typealias Browser = DashboardTests.Browser

    /// A form as a browser sends it, field by field (raw: already percent-encoded as the test wants).
    struct Form: Sendable {
        var path: String
        var fields: [(String, String)]
        /// Fields a browser may leave out (unchecked boxes, blank optional inputs).
        var optional: Set<String>
    }

    static let hostile: [(name: String, value: String)] = [
        ("NUL", "a%00b"), ("C0", "%1F"), ("U+FFFE", "%EF%BF%BE"), ("not UTF-8", "%FF%FE"), ("broken escape", "%G1"),
        ("over-long", String(repeating: "x", count: 20_000)),
    ]

    @Test func everyFormRefusesEveryBadFieldWithA4xxPage() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            _ = try await server.send(
                .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                json: ["platform": "ios", "version": "2.0", "releasedAt": "2026-01-01T00:00:00Z", "rolloutPercent": 10])
            var browser = Browser(server: server)
            _ = try await browser.signIn(harness.adminKey)
            let csrf = try await browser.csrf()
            let common = [("csrf", csrf), ("platform", "ios"), ("revision", "0"), ("reason", "because")]
            let newRelease = common + [
                ("version", "3.0"), ("releasedAt", "2026-01-01T00:00:00Z"), ("rolloutPercent", "10"),
                ("minimumOSVersion", "15.0"), ("note", "Faster"),
            ]
            let forms = [
                Form(
                    path: "/dashboard/apps/expenses/policy",
                    fields: common + [
                        ("enabled", "true"), ("allowSkip", "true"), ("minimumVersion", "1.0"), ("targetVersion", "2.0"),
                        ("blockedVersions", "0.9"), ("notifyAfterDays", "1"), ("blockAfterDays", "30"),
                        ("versionsBehindThreshold", "1"), ("remindIntervalSeconds", "60"), ("checkIntervalSeconds", "60"),
                    ],
                    optional: [
                        "enabled", "allowSkip", "minimumVersion", "targetVersion", "blockedVersions", "notifyAfterDays",
                        "blockAfterDays", "versionsBehindThreshold", "remindIntervalSeconds", "checkIntervalSeconds",
                    ]),
                Form(path: "/dashboard/apps/expenses/minimum", fields: common + [("minimumVersion", "1.5")], optional: []),
                Form(
                    path: "/dashboard/apps/expenses/releases/2.0", fields: common.map { $0.0 == "revision" ? ("revision", "1") : $0 } + [("action", "rollout"), ("percent", "20")],
                    optional: []),
                Form(
                    path: "/dashboard/apps/expenses/settings",
                    fields: [
                        ("csrf", csrf), ("revision", "1"), ("reason", "because"), ("name", "Expenses"), ("defaultLocale", "en"),
                        ("platform.0", "ios"), ("updateURL.0", "https://example.com/x"), ("storeId.0", "1"), ("bundleId.0", "com.x"),
                    ],
                    optional: ["platform.0", "updateURL.0", "storeId.0", "bundleId.0"]),
                Form(
                    path: "/dashboard/apps/expenses/new-release/preview",
                    fields: newRelease, optional: ["rolloutPercent", "minimumOSVersion", "note"]),
                Form(
                    path: "/dashboard/apps/expenses/new-release",
                    fields: newRelease, optional: ["rolloutPercent", "minimumOSVersion", "note"]),
                Form(
                    path: "/dashboard/apps/expenses/webhooks",
                    fields: [
                        ("csrf", csrf), ("url", "https://93.184.215.14/hook"), ("kind.release.changed", "on"), ("format", "json"),
                        ("thresholds", ""),
                    ],
                    optional: ["format", "thresholds"]),
                Form(
                    path: "/dashboard/apps/expenses/webhooks/00000000-0000-4000-8000-000000000000/test", fields: [("csrf", csrf)],
                    optional: []),
                Form(path: "/dashboard/sign-out", fields: [("csrf", csrf)], optional: []),
            ]
            for form in forms {
                for (index, (name, _)) in form.fields.enumerated() {
                    var variants: [(String, [(String, String)])] = Self.hostile.map { bad in
                        var fields = form.fields
                        fields[index].1 = bad.value
                        return (bad.name, fields)
                    }
                    variants.append(("twice", form.fields + [form.fields[index]]))
                    if !form.optional.contains(name) {
                        variants.append(("missing", form.fields.filter { $0.0 != name }))
                    }
                    for (kind, fields) in variants {
                        let reply = try await browser.postRaw(form.path, fields)
                        let context = "\(form.path) \(name) \(kind): \(reply.status) \(reply.text.prefix(200))"
                        #expect((400..<500).contains(reply.status), "\(context)")
                        #expect(reply.headers["Content-Type"].first?.hasPrefix("text/html") == true, "\(context)")
                    }
                }
            }
            // Sign-in, and a form that is not a form at all.
            for fields in [[("token", "a%00")], [("token", "%FF")], [("token", harness.readKey), ("token", harness.readKey)], []] {
                let reply = try await Browser(server: server).postRaw("/dashboard/sign-in", fields)
                #expect((400..<500).contains(reply.status), "sign-in \(fields.map(\.0)): \(reply.status)")
            }
            let json = try await server.request(
                .POST, "/dashboard/sign-in", headers: [("Content-Type", "application/json")], body: Data("{}".utf8))
            #expect(json.status == 415)
            // Queries of pages.
            for path in [
                "/dashboard/apps/expenses?days=%00", "/dashboard/apps/expenses?platform=%FF",
                "/dashboard/apps/expenses?days=1e9", "/dashboard/apps/expenses/rollout?candidate=1.0%00&platform=ios",
                "/dashboard/apps/expenses/history?before=-1", "/dashboard/apps/expenses?days=1&days=2",
                "/dashboard/apps/expenses/releases/%FF", "/dashboard/apps/%FF",
            ] {
                // As sent on the wire, with the session: the HTTP client library turns a path it cannot
                // decode (`%FF`) into `/`, so these pages were never asked for through it.
                let connection = try await RawConnection.open(port: server.port)
                let cookie = try #require(browser.cookie)
                await connection.send("GET \(path) HTTP/1.1\r\nHost: x\r\nCookie: \(cookie)\r\nConnection: close\r\n\r\n")
                try await Waits.until("the connection closed", timeout: .seconds(10)) { connection.isClosed }
                #expect(connection.status.map { (400..<500).contains($0) } == true, "\(path): \(connection.answer.prefix(200))")
            }
        }
    }

    /// Escaping is per Unicode scalar: a `"` or `<` that a combining mark joins into one grapheme with
    /// the next character is escaped all the same, in every place a user's text appears.
    @Test func quotesAndBracketsFollowedByCombiningMarksAreEscapedEverywhere() async throws {
        let evil = "Q\"\u{301}x<\u{338}y'\u{301}"
        #expect(HTML.escape(evil) == "Q&quot;\u{301}x&lt;\u{338}y&#39;\u{301}")
        let harness = try await Harness.empty()
        let secret = try await harness.sql { client in
            try await KeyStore(client: client, logger: TestEnvironment.logger).create(
                name: "owner \(evil)", scope: .admin, appId: nil, now: Date()).1
        }
        try await harness.run { server in
            #expect(try await server.send(.POST, "/v1/apps", key: secret, json: ["id": "evil", "name": .string(evil), "reason": .string(evil)]).status == 201)
            #expect(try await server.send(
                .POST, "/v1/apps/evil/releases", key: secret,
                json: ["platform": "ios", "version": "1.0", "releasedAt": "2026-01-01T00:00:00Z", "reason": .string(evil)]).status == 201)
            var browser = Browser(server: server)
            _ = try await browser.signIn(secret)
            for path in ["/dashboard", "/dashboard/apps/evil", "/dashboard/apps/evil/history", "/dashboard/apps/evil/rollout?platform=ios"] {
                let page = try await browser.get(path)
                #expect(page.status == 200, "\(path)")
                let text = page.text
                for raw in ["\"\u{301}", "<\u{338}", "'\u{301}"] {
                    #expect(!Self.containsScalars(text, raw), "\(path) has a raw \(raw.unicodeScalars.map(\.value))")
                }
                #expect(Self.containsScalars(text, "&quot;\u{301}") || Self.containsScalars(text, "&lt;\u{338}"), "\(path) shows the text")
            }
        }
    }

    /// Whether `needle`'s scalars occur in `text` in a row (String's own search matches by grapheme).
    static func containsScalars(_ text: String, _ needle: String) -> Bool {
        let haystack = Array(text.unicodeScalars), pattern = Array(needle.unicodeScalars)
        guard pattern.count <= haystack.count else { return false }
        for start in 0...(haystack.count - pattern.count) where Array(haystack[start..<(start + pattern.count)]) == pattern {
            return true
        }
        return false
    }
}

extension DashboardTests.Browser {
    /// A form post whose fields are sent exactly as given (names and values already encoded).
    func postRaw(_ path: String, _ fields: [(String, String)]) async throws -> Server.Reply {
        var headers = [("Content-Type", "application/x-www-form-urlencoded")]
        if let cookie { headers.append(("Cookie", cookie)) }
        let body = fields.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
        return try await server.request(.POST, path, headers: headers, body: Data(body.utf8), followRedirects: false)
    }
}
