import Foundation
import Testing
import UpshiftCore
import UpshiftWire

/// The policy backtest (`POST /v1/apps/{app}/preview`, docs/ARCHITECTURE.md "The policy backtest"): for a
/// generated fleet, its "today" equals what `GET /check` answers each install now, and its "proposed"
/// equals what the check answers once the change is applied; it writes nothing and names bad fields.
@Suite struct BacktestTests {
    static let start = Timestamp.parse("2026-07-01T12:00:00Z")!

    struct Install {
        var id: String
        var version: String
        var os: String?
        /// The channel of its latest check; nil: it never checked (counted as live).
        var checked: Channel?
    }

    /// Answers by version and OS, as the backtest groups them: action and reason counts per row.
    struct Tally: Equatable, CustomStringConvertible {
        var rows: [String: [String: Int]] = [:]
        mutating func add(_ install: Install, _ answer: JSONValue) {
            let key = "\(Version(install.version)!.normalized) \(install.os ?? "-")"
            for name in [answer["action"]?.stringValue ?? "?", "reason " + (answer["reason"]?.stringValue ?? "?")] {
                rows[key, default: [:]][name, default: 0] += 1
            }
        }
        /// The same counts from one side (`today` or `proposed`) of the backtest's rows.
        init(report: JSONValue, side: String) {
            for row in report["rows"]?.arrayValue ?? [] {
                let key = "\(row["version"]?.stringValue ?? "?") \(row["osVersion"]?.stringValue ?? "-")"
                let tally = row[side]
                for action in ["force", "soft", "none"] {
                    if let count = tally?[action]?.intValue, count > 0 { rows[key, default: [:]][action] = count }
                }
                for (reason, count) in tally?["reasons"]?.objectValue ?? [:] {
                    if let count = count.intValue, count > 0 { rows[key, default: [:]]["reason " + reason] = count }
                }
            }
        }
        init() {}
        var description: String { rows.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value.sorted { $0.key < $1.key })" }.joined(separator: "\n") }
    }

    static func fleet() -> [Install] {
        var random = SplitMix64(seed: 21)
        return (0..<120).map { _ in
            Install(
                id: random.uuid(), version: ["1.0", "1.1", "2.0", "2.0"][Int(random.next() % 4)],
                os: ["15.0", "17.2", nil][Int(random.next() % 3)],
                checked: [Channel.beta, .live, nil, nil][Int(random.next() % 4)])
        }
    }

    @Test func todayIsWhatTheCheckAnswersAndProposedIsWhatItAnswersOnceApplied() async throws {
        let harness = try await Harness.make(now: Self.start)
        let fleet = Self.fleet()
        var configuration = harness.configuration()
        configuration.check.ratePerClient.rate = 0  // every install asks from loopback
        try await harness.run(configuration) { server in
            let key = harness.adminKey
            // 2.0 staged at 30 %, 2.1 staged at 50 % (needs iOS 16), a beta for those who ask for it.
            let releases: [(String, Double, Double, String, String)] = [
                ("1.0", 60, 100, "14.0", "live"), ("1.1", 30, 100, "14.0", "live"), ("2.0", 10, 30, "14.0", "live"),
                ("2.1", 5, 50, "16.0", "live"), ("2.2.0-beta.1", 2, 100, "14.0", "beta"),
            ]
            for (version, daysAgo, percent, os, channel) in releases {
                let created = try await server.send(.POST, "/v1/apps/expenses/releases", key: key, json: .object([
                    "platform": .string("ios"), "version": .string(version), "channel": .string(channel),
                    "releasedAt": .string(Timestamp.format(Self.start.addingTimeInterval(-daysAgo * 86_400))),
                    "rolloutPercent": .number(JSONNumber(percent)), "minimumOSVersion": .string(os),
                ]))
                #expect(created.status == 201)
            }
            // The fleet: each launched within the week, some checked since (their channel is that check's).
            var events: [[String: String]] = []
            for (index, install) in fleet.enumerated() {
                var event = [
                    "id": UUID().uuidString, "type": "launched", "installId": install.id, "platform": "ios",
                    "appVersion": install.version,
                    "occurredAt": Timestamp.format(Self.start.addingTimeInterval(-Double(index % 6 + 1) * 86_400)),
                ]
                event["osVersion"] = install.os
                events.append(event)
            }
            #expect(try await server.postEvents(events, key: harness.ingestKey).status == 200)
            func check(_ install: Install, channel: Channel?) async throws -> JSONValue {
                var query = "/v1/apps/expenses/check?platform=ios&version=\(install.version)&install=\(install.id)"
                if let os = install.os { query += "&os=\(os)" }
                if let channel { query += "&channel=\(channel.rawValue)" }
                let reply = try await server.request(.GET, query)
                #expect(reply.status == 200)
                return try reply.value()
            }
            for install in fleet {
                if let channel = install.checked { _ = try await check(install, channel: channel) }
            }
            // One install last seen 10 days ago: outside the window, not counted.
            let old = ["id": UUID().uuidString, "type": "launched", "installId": UUID().uuidString.lowercased(),
                       "platform": "ios", "appVersion": "1.0", "occurredAt": Timestamp.format(Self.start.addingTimeInterval(-10 * 86_400))]
            #expect(try await server.postEvents([old], key: harness.ingestKey).status == 200)
            try await harness.waitForProjections()

            // Proposed: a minimum of 1.1, 2.0 widened to 60 %, 2.1 halted.
            let proposal: JSONValue = .object([
                "policy": .object(["enabled": .bool(true), "minimumVersion": .string("1.1")]),
                "releases": .object([
                    "2.0": .object(["rolloutPercent": .number(60)]), "2.1": .object(["rolloutAction": .string("halt")]),
                ]),
            ])
            let preview = try await server.send(.POST, "/v1/apps/expenses/preview?platform=ios", key: harness.readKey, json: proposal)
            #expect(preview.status == 200, "\(String(decoding: preview.body, as: UTF8.self))")
            let report = try preview.value()
            #expect(report["installs"]?.intValue == fleet.count, "installs active in the last 7 days")
            #expect(report["windowDays"]?.intValue == 7)

            // Today: what the check answers each install now, with the channel of its latest check.
            var today = Tally()
            var answers: [String: JSONValue] = [:]
            for install in fleet {
                let answer = try await check(install, channel: install.checked)
                answers[install.id] = answer
                today.add(install, answer)
            }
            #expect(Tally(report: report, side: "today") == today, "backtest:\n\(Tally(report: report, side: "today"))\nchecks:\n\(today)")
            // Nothing was written: the policy is still never set.
            #expect(try await server.send(.GET, "/v1/apps/expenses/policies/ios", key: key).etag == "\"0\"")

            // Applied: the check answers what the backtest proposed, and the changed answers are counted.
            #expect(try await server.send(.PUT, "/v1/apps/expenses/policies/ios", key: key,
                json: .object(["enabled": .bool(true), "minimumVersion": .string("1.1")]), headers: [("If-Match", "\"0\"")]).status == 200)
            #expect(try await server.send(.PATCH, "/v1/apps/expenses/releases/ios/2.0", key: key,
                json: .object(["rolloutPercent": .number(60)]), headers: [("If-Match", "\"1\"")]).status == 200)
            #expect(try await server.send(.PATCH, "/v1/apps/expenses/releases/ios/2.1", key: key,
                json: .object(["rolloutAction": .string("halt")]), headers: [("If-Match", "\"1\"")]).status == 200)
            var proposed = Tally()
            var changed = 0
            for install in fleet {
                let answer = try await check(install, channel: install.checked)
                proposed.add(install, answer)
                let before = answers[install.id]!
                if ["action", "reason", "latestVersion"].contains(where: { before[$0] != answer[$0] }) { changed += 1 }
            }
            #expect(Tally(report: report, side: "proposed") == proposed, "backtest:\n\(Tally(report: report, side: "proposed"))\nchecks:\n\(proposed)")
            #expect(report["changed"]?.intValue == changed)
            #expect(changed > 10, "the change moves many answers: \(changed)")
            #expect((report["today"]?["reasons"]?["not_in_rollout"]?.intValue ?? 0) > 0, "staged rollouts decide per install")
        }
    }

    @Test func badProposalsNameTheirFieldAndOnlyReadersMayAsk() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { server in
            _ = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: .object([
                "platform": .string("ios"), "version": .string("2.0"), "releasedAt": .string("2026-06-01T00:00:00Z"),
            ]))
            try await harness.waitForProjections()
            func preview(_ body: JSONValue, key: String? = nil, query: String = "platform=ios") async throws -> Server.Reply {
                try await server.send(.POST, "/v1/apps/expenses/preview?\(query)", key: key ?? harness.readKey, json: body)
            }
            let cases: [(JSONValue, Int, String)] = [
                (.object(["policy": .object(["enabled": .bool(true), "minimumVersion": .string("one")])]), 400, "policy.minimumVersion"),
                (.object(["policy": .object(["minimumVersion": .string("1.0")])]), 400, "policy.enabled"),
                (.object(["releases": .object(["2.0": .object(["rolloutPercent": .number(101)])])]), 400, "releases.2.0.rolloutPercent"),
                (.object(["releases": .object(["2.0": .object(["rolloutAction": .string("pause")])])]), 422, "releases.2.0.rolloutAction"),
                (.object(["releases": .object(["2.0": .object(["rolloutSchedule": .string("fast")])])]), 400, "releases.2.0.rolloutSchedule"),
                (.object(["policy": .object(["enabled": .bool(true)]), "minimum": .string("2.0")]), 400, "minimum"),
                (.array([]), 400, "body"),
                (.object(["policy": .object(["enabled": .bool(true), "reason": .string("a\u{0F}b")])]), 400, "policy.reason"),
                (.object(["releases": .object(["2.0": .object(["reason": .number(1)])])]), 400, "releases.2.0.reason"),
            ]
            for (body, status, field) in cases {
                let reply = try await preview(body)
                #expect(reply.status == status, "\(body): \(String(decoding: reply.body, as: UTF8.self))")
                #expect(try reply.value()["field"]?.stringValue == field, "\(body)")
            }
            let unknown = try await preview(.object(["releases": .object(["9.9": .object([:])])]))
            #expect(unknown.status == 404, "a release the platform does not have, as for its PATCH")
            #expect(try await preview(.object([:]), query: "window=7").status == 400, "platform is required")
            #expect(try await preview(.object([:]), query: "platform=ios&window=91").status == 400)
            let empty = try await preview(.object([:]))
            #expect(empty.status == 200)
            #expect(try empty.value()["changed"]?.intValue == 0, "no change, no changed answer")
            #expect(try await preview(.object([:]), key: harness.ingestKey).status == 403)
            #expect(try await preview(.object([:]), key: harness.adminKey).status == 200)
        }
    }
}
