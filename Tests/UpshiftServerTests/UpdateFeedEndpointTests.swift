import Foundation
import NIOCore
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftTestSupport

/// The feeds for existing client libraries through the real server (docs/CLIENTS.md): a catalog written
/// through the admin API, read back as Sparkle, Siren, upgrader and iVersion read it.
@Suite(.serverTimeLimit) struct UpdateFeedEndpointTests {
    static let now = Timestamp.parse("2026-06-01T12:00:00Z")!

    /// App `notes`: iOS 2.0 (live, 5 days), 2.1-beta.1 (beta), 1.9 (blocked); macOS 3.0 with a download.
    static func load(_ server: Server, key: String) async throws {
        func created(_ reply: Server.Reply) {
            #expect(reply.status == 201, "\(reply.text)")
        }
        created(try await server.send(.POST, "/v1/apps", key: key, json: .object([
            "id": .string("notes"), "name": .string("Notes"),
            "updateURL": .object(["ios": .string("https://apps.apple.com/app/id42")]),
            "storeId": .object(["ios": .string("42")]), "bundleId": .object(["ios": .string("com.example.notes")]),
        ])))
        let releases: [[String: JSONValue]] = [
            ["platform": "ios", "version": "2.0", "releasedAt": "2026-05-27T12:00:00Z",
             "notes": .object(["en": .array(["Faster"]), "de": .array(["Schneller"])])],
            ["platform": "ios", "version": "2.1-beta.1", "releasedAt": "2026-05-30T12:00:00Z", "channel": "beta"],
            ["platform": "ios", "version": "1.9", "releasedAt": "2026-05-20T12:00:00Z"],
            ["platform": "macos", "version": "3.0", "build": .number(JSONNumber(300)), "releasedAt": "2026-05-28T12:00:00Z",
             "downloadURL": "https://example.com/Notes-3.0.zip", "downloadLength": .number(JSONNumber(1_000))],
        ]
        for release in releases {
            created(try await server.send(.POST, "/v1/apps/notes/releases", key: key, json: .object(release)))
        }
        let policy = try await server.send(
            .PUT, "/v1/apps/notes/policies/ios", key: key,
            json: .object(["enabled": true, "minimumVersion": "1.5", "blockedVersions": .array(["1.9"])]),
            headers: [("If-Match", "\"0\"")])
        #expect(policy.status == 200)
    }

    static func text(_ reply: Server.Reply) -> String { reply.text }

    @Test func theAppcastAnswersWithAnETagAndIgnoresWhatItDoesNotKnow() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            // Sparkle's system profile, upgrader's cache buster (unencoded, even malformed), repeated unknowns.
            let path = "/v1/apps/notes/appcast.xml?platform=ios&appName=Notes&osVersion=14.1&_cb=2026-06-01 12:00&x=%FF&x=2"
            let reply = try await server.request(.GET, path.replacingOccurrences(of: " ", with: "%20"))
            #expect(reply.status == 200, "\(Self.text(reply))")
            #expect(reply.headers["Content-Type"].first == "application/rss+xml; charset=utf-8")
            let body = Self.text(reply)
            #expect(body.contains(#"xmlns:sparkle="http://www.andymatuschak.org/xml-namespaces/sparkle""#))
            #expect(body.components(separatedBy: "<item>").count == 2)  // 2.0 only: 1.9 blocked, the beta not live
            #expect(body.contains("<sparkle:version>2.0</sparkle:version>"))
            #expect(body.contains(#"<sparkle:criticalUpdate sparkle:version="2.0"/>"#))
            let etag = try #require(reply.etag)
            let again = try await server.request(.GET, "/v1/apps/notes/appcast.xml?platform=ios", headers: [("If-None-Match", etag)])
            #expect(again.status == 304 && again.body.isEmpty)

            let beta = try await server.request(
                .GET, "/v1/apps/notes/appcast.xml?platform=ios&channel=beta", headers: [("Accept-Language", "de-CH,de;q=0.9")])
            #expect(Self.text(beta).contains("<sparkle:channel>beta</sparkle:channel>"))
            #expect(Self.text(beta).contains(#"<description sparkle:format="plain-text">Schneller</description>"#))
            #expect(beta.etag != etag)
            // Sparkle's system profile appends a lang of its own: the first valid one counts, none is refused.
            for (query, notes) in [("lang=de&lang=en", "Schneller"), ("lang=%00&lang=de", "Schneller"), ("lang=x!&lang=%FF", "Faster")] {
                let reply = try await server.request(.GET, "/v1/apps/notes/appcast.xml?platform=ios&\(query)")
                #expect(reply.status == 200 && Self.text(reply).contains(">\(notes)</description>"), "\(query)")
            }

            let mac = Self.text(try await server.request(.GET, "/v1/apps/notes/appcast.xml?platform=macos"))
            #expect(mac.contains(#"<enclosure url="https://example.com/Notes-3.0.zip" length="1000" type="application/octet-stream" sparkle:version="300"/>"#))
        }
    }

    /// How long a request of the test below may take: among the untagged suites two cores run some forty
    /// servers, and an answer from memory once took over the client's usual 30 s there. A request that
    /// waited on the stalled database would still fail: the pool's bound answers it `503`.
    static let patience = TimeAmount.seconds(90)

    /// Every feed revalidates (`ETag`, `304`), answers from the in-memory catalog while the database does
    /// not answer at all, and is limited per client together with the check (`429` with `Retry-After`).
    @Test func everyFeedRevalidatesAnswersWithoutTheDatabaseAndIsLimitedWithTheCheck() async throws {
        let harness = try await Harness.empty(now: Self.now)
        let proxy = try await TCPProxy.start(targetHost: harness.database.host, targetPort: harness.database.port)
        var configuration = harness.configuration()
        configuration.database.port = proxy.port
        configuration.check.ratePerClient = RateLimit(rate: 0.001, burst: 14)
        let feeds = [
            "/v1/apps/notes/appcast.xml?platform=ios", "/v1/apps/notes/versions.plist?platform=ios",
            "/v1/apps/notes/lookup?bundleId=com.example.notes", "/v1/apps/nope/lookup",
        ]
        try await harness.run(configuration) { server in
            try await Self.load(server, key: harness.rootKey)
            var bodies: [String: Data] = [:]
            for feed in feeds {  // 8 of the 14
                let first = try await server.request(.GET, feed, timeout: Self.patience)
                #expect(first.status == 200, "\(feed)")
                bodies[feed] = first.body
                let etag = try #require(first.etag, "\(feed)")
                let again = try await server.request(.GET, feed, headers: [("If-None-Match", etag)], timeout: Self.patience)
                #expect(again.status == 304 && again.body.isEmpty, "\(feed)")
                #expect(again.etag == etag, "\(feed)")
            }
            proxy.stall()
            for feed in feeds.prefix(3) {  // 3 more, and one never asked before: rendered from memory
                let started = ContinuousClock.now
                let reply = try await server.request(.GET, feed, timeout: Self.patience)
                #expect(reply.status == 200 && reply.body == bodies[feed], "\(feed) while the database stalls")
                // A feed that asked the stalled database would wait for the answer bound (30 s in tests);
                // from memory it answers in milliseconds, or a few seconds on a loaded machine.
                #expect(ContinuousClock.now - started < .seconds(10), "\(feed) waited on the database")
            }
            let fresh = try await server.request(.GET, "/v1/apps/notes/versions.plist?platform=ios&lang=de", timeout: Self.patience)
            #expect(fresh.status == 200 && Self.text(fresh).contains("Schneller"))
            proxy.restore()
            // 12 asked; the check and the feeds share the client's burst.
            var statuses: [Int] = []
            for path in ["/v1/apps/notes/check?platform=ios&version=1.0", feeds[0], feeds[1], feeds[2], feeds[0]] {
                let reply = try await server.request(.GET, path, timeout: Self.patience)
                statuses.append(reply.status)
                if reply.status == 429 { #expect(reply.headers["Retry-After"].first != nil) }
            }
            #expect(statuses == [200, 200, 429, 429, 429], "\(statuses)")
        }
        await proxy.stop()
    }

    @Test func aFeedsOwnParametersAreCheckedAndAnUnknownAppIsNotFound() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            for (path, field) in [
                ("/v1/apps/notes/appcast.xml", "platform"), ("/v1/apps/notes/appcast.xml?platform=iOS!", "platform"),
                ("/v1/apps/notes/appcast.xml?platform=ios&channel=nightly", "channel"),
                ("/v1/apps/notes/versions.plist?platform=ios&platform=macos", "platform"),
                ("/v1/apps/notes/versions.plist?lang=de", "platform"),
            ] {
                let reply = try await server.request(.GET, path)
                #expect(reply.status == 400, "\(path)")
                #expect(try reply.json()["field"] as? String == field, "\(path): \(Self.text(reply))")
            }
            for path in [
                "/v1/apps/nope/appcast.xml?platform=ios", "/v1/apps/nope/versions.plist?platform=ios",
                "/v1/apps/notes/usa/lookup", "/v1/apps/notes/u1/lookup", "/v1/apps/nope/usa/lookup",
                // An app segment that cannot be an app id is no such path for the lookup too.
                "/v1/apps/Not_An_Id/lookup", "/v1/apps/%C2%84/us/lookup",
            ] {
                #expect(try await server.request(.GET, path).status == 404, "\(path)")
            }
            // The lookup answers an app it does not know as Apple answers an id it does not know: 200, no result.
            for path in ["/v1/apps/nope/lookup", "/v1/apps/nope/us/lookup?bundleId=com.example.nope"] {
                let reply = try await server.request(.GET, path)
                #expect(reply.status == 200, "\(path)")
                #expect(reply.headers["Content-Type"].first == "application/json; charset=utf-8")
                #expect(reply.text == #"{"resultCount":0,"results":[]}"#, "\(path)")
            }
        }
    }

    @Test func hostileValuesOfTheNewFieldsAreRefusedNamingThem() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            let long = String(repeating: "a", count: 3_000)
            let hostile: [(String, JSONValue)] = [
                ("downloadURL", .string("https://example.com/" + long)), ("downloadURL", "https://example.com/\u{0}"),
                ("downloadURL", 42), ("downloadURL", .array([])),
                ("downloadLength", .number(JSONNumber(literal: "1e300")!)), ("downloadLength", -1), ("downloadLength", "12"),
                ("downloadLength", .number(JSONNumber(CatalogInput.maximumDownloadLength + 1))),
                ("edSignature", "\u{0}"), ("edSignature", .string(long)), ("edSignature", 5),
            ]
            for (index, (field, value)) in hostile.enumerated() {
                let body: JSONValue = .object([
                    "platform": "macos", "version": .string("9.\(index)"), "releasedAt": "2026-05-28T12:00:00Z", field: value,
                ])
                let reply = try await server.send(.POST, "/v1/apps/notes/releases", key: harness.rootKey, json: body)
                let named = try reply.json()["field"] as? String
                #expect(reply.status == 400 && named == field, "\(field) \(value): \(Self.text(reply))")
            }
            for (value, field) in [
                (JSONValue.object(["ios": 5]), "bundleId.ios"), (.object(["ios": "a\u{0}"]), "bundleId.ios"),
                (.object(["ios": .string(long)]), "bundleId.ios"), ("com.example", "bundleId"),
            ] {
                let reply = try await server.send(
                    .POST, "/v1/apps", key: harness.rootKey, json: .object(["id": "other", "name": "Other", "bundleId": value]))
                let named = try reply.json()["field"] as? String
                #expect(reply.status == 400 && named == field, "\(value): \(Self.text(reply))")
            }
            // Sent twice in one body: refused before any field is read.
            let twice = #"{"platform":"macos","version":"9.9","releasedAt":"2026-05-28T12:00:00Z","downloadLength":1,"downloadLength":2}"#
            let reply = try await server.request(
                .POST, "/v1/apps/notes/releases",
                headers: [("Authorization", "Bearer \(harness.rootKey)"), ("Content-Type", "application/json")],
                body: Data(twice.utf8))
            #expect(reply.status == 400, "\(Self.text(reply))")
        }
    }

    @Test func theLookupIsAlwaysOneResultOrNone() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            for path in [
                "/v1/apps/notes/lookup?bundleId=com.example.notes&country=us&_cb=1", "/v1/apps/notes/US/lookup?id=42",
                "/v1/apps/notes/de/lookup?lang=de_de&entity=software",
                "/v1/apps/notes/lookup?lang=%00&entity=%01",  // ignored
            ] {
                let reply = try await server.request(.GET, path)
                #expect(reply.status == 200 && reply.headers["Content-Type"].first == "application/json; charset=utf-8")
                let json = try reply.json()
                #expect(json["resultCount"] as? Int == 1, "\(path): \(Self.text(reply))")
                let result = try #require((json["results"] as? [[String: Any]])?.first)
                #expect(result["trackId"] as? Int == 42 && result["version"] as? String == "2.0")
                #expect(result["currentVersionReleaseDate"] as? String == "2026-05-27T12:00:00Z")
                #expect(result["description"] as? String == "[:mav: 1.5]")
                #expect(result["releaseNotes"] as? String == (path.contains("lang=de") ? "Schneller" : "Faster"))
            }
            for path in [
                "/v1/apps/notes/lookup?bundleId=com.example.other", "/v1/apps/notes/lookup?id=43",
                "/v1/apps/notes/lookup?entity=macSoftware",  // no numeric store id on macOS
                "/v1/apps/notes/lookup?platform=android",
                // Never a 400, as on Apple's: what cannot name this app finds nothing.
                "/v1/apps/notes/lookup?bundleId=%01", "/v1/apps/notes/lookup?id=42&id=42",
                "/v1/apps/notes/lookup?platform=IOS!", "/v1/apps/notes/lookup?id=%FF",
            ] {
                let json = try await server.request(.GET, path).json()
                #expect(json["resultCount"] as? Int == 0 && (json["results"] as? [Any])?.isEmpty == true, "\(path)")
            }
        }
    }

    @Test func theVersionsPlistFollowsTheCatalog() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)
            let reply = try await server.request(.GET, "/v1/apps/notes/versions.plist?platform=ios&lang=de")
            #expect(reply.headers["Content-Type"].first == "application/x-plist; charset=utf-8")
            let plist = try PropertyListSerialization.propertyList(from: reply.body, format: nil) as? [String: [String]]
            #expect(plist == ["2.0": ["Schneller"]])
            // A policy switched off empties every feed, at once (the snapshot follows the write).
            let off = try await server.send(
                .PUT, "/v1/apps/notes/policies/ios", key: harness.rootKey, json: .object(["enabled": false]),
                headers: [("If-Match", "\"1\"")])
            #expect(off.status == 200)
            let empty = try await server.request(.GET, "/v1/apps/notes/versions.plist?platform=ios")
            #expect(try PropertyListSerialization.propertyList(from: empty.body, format: nil) as? [String: [String]] == [:])
            #expect(try await server.request(.GET, "/v1/apps/notes/lookup").json()["resultCount"] as? Int == 0)
        }
    }

    /// Sparkle compares macOS builds, not versions: a write whose build does not increase with versions is
    /// done and answered with a warning naming the release it crosses; one that does increase has none.
    @Test func aMacOSBuildThatDoesNotIncreaseWithVersionsIsWarnedAbout() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(server, key: harness.rootKey)  // macOS 3.0, build 300
            func warnings(_ reply: Server.Reply) throws -> [String] {
                try reply.value()["warnings"]?.arrayValue?.compactMap(\.stringValue) ?? []
            }
            let lower = try await server.send(
                .POST, "/v1/apps/notes/releases", key: harness.rootKey,
                json: ["platform": "macos", "version": "3.1", "build": 250, "releasedAt": "2026-05-29T12:00:00Z",
                       "downloadURL": "https://example.com/Notes-3.1.zip"])
            #expect(lower.status == 201)
            #expect(try warnings(lower).count == 1)
            #expect(try warnings(lower).first?.contains("build 250 of macos 3.1 does not increase with versions: 3.0 has build 300") == true)
            let fixed = try await server.send(
                .PATCH, "/v1/apps/notes/releases/macos/3.1", key: harness.rootKey, json: ["build": 310],
                headers: [("If-Match", "\"1\"")])
            #expect(fixed.status == 200)
            #expect(try warnings(fixed).isEmpty)
            // Other platforms compare versions: builds are informational there.
            let ios = try await server.send(
                .POST, "/v1/apps/notes/releases", key: harness.rootKey,
                json: ["platform": "ios", "version": "2.2", "build": 1, "releasedAt": "2026-05-29T12:00:00Z"])
            #expect(ios.status == 201)
            #expect(try warnings(ios).isEmpty)
        }
    }
}
