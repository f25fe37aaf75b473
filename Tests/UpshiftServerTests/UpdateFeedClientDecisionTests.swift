import Foundation
import Testing
import UpshiftCore
import UpshiftTestData
import UpshiftTestSupport

/// The feeds through the real server, asked what each client decides by its own rules (``SparkleClient``,
/// ``UpgraderClient``) and compared with what `GET …/check` answers the same installed version
/// (docs/CLIENTS.md; the property over random catalogs is `UpdateFeedClientsTests`).
@Suite(.serverTimeLimit) struct UpdateFeedClientDecisionTests {
    static let now = Timestamp.parse("2026-06-01T12:00:00Z")!

    static func daysAgo(_ days: Int) -> String { Timestamp.formatSeconds(now.addingTimeInterval(-Double(days) * 86_400)) }

    static func text(_ reply: Server.Reply) -> String { reply.text }

    /// App `tools` with store pages for iOS (a store URL) and macOS (https), its releases, and a policy per platform.
    static func load(
        _ server: Server, key: String, releases: [[String: JSONValue]], policies: [String: [String: JSONValue]],
        macPage: String = "https://example.com/tools"
    ) async throws {
        let app = try await server.send(.POST, "/v1/apps", key: key, json: .object([
            "id": "tools", "name": "Tools",
            "updateURL": .object(["ios": "itms-apps://apps.apple.com/app/id42", "macos": .string(macPage)]),
            "storeId": .object(["ios": "42"]),
        ]))
        #expect(app.status == 201, "\(text(app))")
        for release in releases {
            let reply = try await server.send(.POST, "/v1/apps/tools/releases", key: key, json: .object(release))
            #expect(reply.status == 201, "\(text(reply))")
        }
        for (platform, policy) in policies {
            let reply = try await server.send(
                .PUT, "/v1/apps/tools/policies/\(platform)", key: key, json: .object(policy), headers: [("If-Match", "\"0\"")])
            #expect(reply.status == 200, "\(text(reply))")
        }
    }

    /// The check's action and reason for an installed version, asked as a feed reader would be (no install).
    static func check(_ server: Server, _ query: String) async throws -> (action: String, reason: String, latest: String?) {
        let json = try await server.request(.GET, "/v1/apps/tools/check?\(query)").json()
        return (json["action"] as? String ?? "?", json["reason"] as? String ?? "?", json["latestVersion"] as? String)
    }

    /// (a) `blockAfterDays` 14, 2.0 released 20 days ago, 2.1 two days ago: an install of 1.9 is forced
    /// (`release_overdue`, target 2.1) by the check, and by Sparkle, upgrader's appcast and upgrader's lookup.
    @Test func anOverdueReleaseThatIsNotTheNewestForcesInEveryClient() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            var releases: [[String: JSONValue]] = []
            for platform in ["ios", "macos"] {
                for (version, build, age) in [("1.9", 190, 40), ("2.0", 200, 20), ("2.1", 210, 2)] {
                    var release: [String: JSONValue] = [
                        "platform": .string(platform), "version": .string(version), "releasedAt": .string(Self.daysAgo(age)),
                    ]
                    if platform == "macos" {
                        release["build"] = .number(JSONNumber(build))
                        release["downloadURL"] = .string("https://example.com/Tools-\(version).zip")
                    }
                    releases.append(release)
                }
            }
            let policy: [String: JSONValue] = ["enabled": true, "blockAfterDays": .number(JSONNumber(14))]
            try await Self.load(server, key: harness.rootKey, releases: releases, policies: ["ios": policy, "macos": policy])

            let ios = try await Self.check(server, "platform=ios&version=1.9")
            #expect(ios.action == "force" && ios.reason == "release_overdue" && ios.latest == "2.1", "\(ios)")
            let mac = try await Self.check(server, "platform=macos&version=1.9&build=190&os=14.0")
            #expect(mac.action == "force" && mac.reason == "release_overdue" && mac.latest == "2.1", "\(mac)")

            let macAppcast = Self.text(try await server.request(.GET, "/v1/apps/tools/appcast.xml?platform=macos"))
            #expect(SparkleClient.outcome(macAppcast, host: .init(version: "190", os: "14.0")) == .force)
            // On 2.0, the newest overdue release, nothing forces any more: 2.1 is offered softly, by both.
            #expect(try await Self.check(server, "platform=macos&version=2.0&build=200&os=14.0").action == "soft")
            #expect(SparkleClient.outcome(macAppcast, host: .init(version: "200", os: "14.0")) == .soft)

            let appcast = Self.text(try await server.request(.GET, "/v1/apps/tools/appcast.xml?platform=ios"))
            let upgrader = UpgraderClient.appcast(appcast, platform: "ios", installed: "1.9")
            #expect(upgrader.outcome == .force)
            #expect(upgrader.updateURL == "itms-apps://apps.apple.com/app/id42")  // Update opens the store page
            #expect(UpgraderClient.appcast(appcast, platform: "ios", installed: "2.0").outcome == .soft)

            let lookup = try await server.request(.GET, "/v1/apps/tools/lookup?bundleId=com.example.tools")
            #expect(try lookup.json()["results"].flatMap { ($0 as? [[String: Any]])?.first?["bundleId"] as? String }
                == "com.example.tools")  // echoed: the app has no bundle id for iOS
            #expect(UpgraderClient.lookup(lookup.body, installed: "1.9").outcome == .force)
            #expect(UpgraderClient.lookup(lookup.body, installed: "2.0").outcome == .soft)
        }
    }

    /// (b) A minimum of 3.0 that no listed release reaches: the check offers 2.0 softly, the lookup names
    /// no `[:mav:]` and upgrader offers the same, never a block with nowhere to go.
    @Test func anUnreachableMinimumIsNeverAMinimumAppVersion() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(
                server, key: harness.rootKey,
                releases: [["platform": "ios", "version": "2.0", "releasedAt": .string(Self.daysAgo(5))]],
                policies: ["ios": ["enabled": true, "minimumVersion": "3.0"]])
            let check = try await Self.check(server, "platform=ios&version=1.5")
            #expect(check.action == "soft" && check.latest == "2.0", "\(check)")
            let lookup = try await server.request(.GET, "/v1/apps/tools/lookup")
            #expect(!Self.text(lookup).contains(":mav:"), "\(Self.text(lookup))")
            #expect(UpgraderClient.lookup(lookup.body, installed: "1.5").outcome == .soft)
            #expect(UpgraderClient.lookup(lookup.body, installed: "2.5").outcome == .none)
            #expect(try await Self.check(server, "platform=ios&version=2.5").action == "none")
            let appcast = Self.text(try await server.request(.GET, "/v1/apps/tools/appcast.xml?platform=ios"))
            #expect(!appcast.contains("criticalUpdate"))
            #expect(UpgraderClient.appcast(appcast, platform: "ios", installed: "1.5").outcome == .soft)

            // A reachable minimum is named: 3.0 listed, the minimum stands in the lookup and forces below it.
            let added = try await server.send(.POST, "/v1/apps/tools/releases", key: harness.rootKey, json: .object([
                "platform": "ios", "version": "3.0", "releasedAt": .string(Self.daysAgo(1)),
            ]))
            #expect(added.status == 201)
            try await Waits.until("the lookup lists 3.0", timeout: .seconds(5)) {
                Self.text(try await server.request(.GET, "/v1/apps/tools/lookup")).contains(#""version":"3.0""#)
            }
            let named = try await server.request(.GET, "/v1/apps/tools/lookup")
            #expect(Self.text(named).contains("[:mav: 3.0]"))
            #expect(UpgraderClient.lookup(named.body, installed: "2.5").outcome == .force)
            #expect(try await Self.check(server, "platform=ios&version=2.5").action == "force")
        }
    }

    /// (d) A macOS release whose only URL is an `itms-apps:` page is left out, with a warning on write, and
    /// Sparkle still takes the appcast (one such item would make it refuse the whole feed); so is a
    /// release without a build beside releases with one.
    @Test func aMacItemWithoutAWebLinkIsLeftOutAndTheAppcastStaysValid() async throws {
        let harness = try await Harness.empty(now: Self.now)
        try await harness.run { server in
            try await Self.load(
                server, key: harness.rootKey,
                releases: [[
                    "platform": "macos", "version": "1.0", "build": .number(JSONNumber(100)),
                    "releasedAt": .string(Self.daysAgo(30)), "downloadURL": "https://example.com/Tools-1.0.zip",
                ]],
                policies: [:], macPage: "itms-apps://apps.apple.com/app/id43")
            let storeOnly = try await server.send(.POST, "/v1/apps/tools/releases", key: harness.rootKey, json: .object([
                "platform": "macos", "version": "1.1", "build": .number(JSONNumber(110)), "releasedAt": .string(Self.daysAgo(3)),
            ]))
            #expect(storeOnly.status == 201)
            let warnings = (try storeOnly.json()["warnings"] as? [String]) ?? []
            #expect(warnings.contains { $0.contains("macos 1.1") && $0.contains("leaves it out") }, "\(warnings)")
            let noBuild = try await server.send(.POST, "/v1/apps/tools/releases", key: harness.rootKey, json: .object([
                "platform": "macos", "version": "1.2", "releasedAt": .string(Self.daysAgo(2)),
                "downloadURL": "https://example.com/Tools-1.2.zip",
            ]))
            #expect(((try noBuild.json()["warnings"] as? [String]) ?? []).contains { $0.contains("has no build") })

            let appcast = Self.text(try await server.request(.GET, "/v1/apps/tools/appcast.xml?platform=macos"))
            let items = try #require(SparkleClient.items(appcast), "Sparkle refuses the appcast:\n\(appcast)")
            #expect(items.map(\.version) == ["100"])
            #expect(SparkleClient.outcome(appcast, host: .init(version: "90", os: "14.0")) == .soft)
            // What Sparkle would have done with the store page as an item's only link: refuse the whole feed.
            let withStoreLink = appcast.replacingOccurrences(
                of: "</channel>", with: "<item><sparkle:version>110</sparkle:version><link>itms-apps://apps.apple.com/app/id43</link></item>\n</channel>")
            #expect(SparkleClient.outcome(withStoreLink, host: .init(version: "90", os: "14.0")) == .rejected)
        }
    }
}
