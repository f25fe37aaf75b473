import Foundation
import Testing
import UpshiftCore
import UpshiftTestData

/// Every scenario and bucket case of `../shared/testdata/decisions.json` through the pure engine.
@Suite struct DecisionEngineTests {
    static let cases = Result { try DecisionCases.load() }

    @Test func theSharedFileHasEveryKindOfCase() throws {
        let cases = try Self.cases.get()
        #expect(cases.scenarios.count >= 18)
        #expect(cases.buckets.cases.count >= 15)
        // Every expected field of every check is compared (``scenario(_:)``).
        #expect(cases.scenarios.flatMap(\.checks).map(\.expect.count).reduce(0, +) >= 295)
    }

    @Test(arguments: try DecisionCases.load().buckets.cases)
    func rolloutBucket(_ row: [JSONValue]) throws {
        guard row.count == 4, case .string(let text) = row[0], let app = AppID(validating: text),
            case .string(let version) = row[1], case .string(let install) = row[2], case .number(let bucket) = row[3]
        else { Issue.record("malformed bucket case \(row)"); return }
        #expect(Rollout.bucket(appId: app, version: version, installId: install) == bucket.integer(in: 0...9_999), "\(row)")
        // The backtest's hasher, for the ids that are UUIDs (the check records only those).
        if let uuid = UUID(uuidString: install) {
            var hasher = Rollout.Hasher(appId: app, version: version)
            #expect(hasher.bucket(of: uuid) == bucket.integer(in: 0...9_999), "\(row)")
        }
    }

    /// The backtest hashes a fleet with one reused message: every install of a random fleet gets the
    /// bucket the check computes from its id as the app sends it (upper case, as iOS writes UUIDs).
    @Test(arguments: ["2.0", "10.4.1", "1.0.0-beta.2"])
    func theBacktestsHasherAgreesWithTheCheckForEveryInstall(version: String) {
        var hasher = Rollout.Hasher(appId: "expenses", version: version)
        for _ in 0..<2_000 {
            let install = UUID()
            #expect(hasher.bucket(of: install) == Rollout.bucket(appId: "expenses", version: version, installId: install.uuidString))
        }
    }

    /// The backtest reads install ids only where a bucket may change the answer: below the newest release
    /// with a partial rollout that the install's channel sees, in either catalog. Whole, halted and future
    /// rollouts admit every install alike (or none), so they set no bound.
    @Test func theBacktestReadsIdsOnlyBelowTheNewestPartialReleaseEachChannelSees() throws {
        let now = try #require(Timestamp.parse("2026-07-01T12:00:00Z"))
        func release(_ version: String, _ percent: Double, channel: Channel = .live, paused: Bool = false, daysAgo: Double = 3) -> Release {
            Release(
                platform: "ios", version: Version(version)!, releasedAt: now.addingTimeInterval(-daysAgo * 86_400), channel: channel,
                rolloutPercent: percent, rolloutPaused: paused)
        }
        let app = AppInfo(id: "expenses", name: "Expenses")
        let current = AppCatalog(app: app, releases: [
            release("1.5", 100), release("2.0", 30), release("2.1.0-beta.1", 50, channel: .beta), release("3.0", 20, paused: true),
            release("4.0", 10, daysAgo: -1),
        ])
        let below = try #require(Backtest.idsBelow(platform: "ios", catalogs: [current, current], now: now))
        #expect(below == Backtest.IDsBelow(live: Version("2.0"), beta: Version("2.1.0-beta.1")!))
        #expect(below.bucketMatters(version: Version("1.9.9")!, channel: .live))
        #expect(!below.bucketMatters(version: Version("2.0.0")!, channel: .live))
        #expect(below.bucketMatters(version: Version("2.0.0")!, channel: .beta))
        #expect(!below.bucketMatters(version: Version("2.1.0-beta.1")!, channel: .beta))
        // A proposal that takes 2.1 to 100 % and stages 2.2 at 5 % for live installs: the proposed catalog counts too.
        let proposed = AppCatalog(app: app, releases: [release("2.0", 30), release("2.2", 5)])
        #expect(Backtest.idsBelow(platform: "ios", catalogs: [current, proposed], now: now)
            == Backtest.IDsBelow(live: Version("2.2"), beta: Version("2.2")!))
        // Nothing partial: no install's bucket matters, and no id is read.
        let whole = AppCatalog(app: app, releases: [release("1.5", 100), release("3.0", 20, paused: true), release("2.0", 0)])
        #expect(Backtest.idsBelow(platform: "ios", catalogs: [whole, whole], now: now) == nil)
        #expect(Backtest.idsBelow(platform: "android", catalogs: [current, proposed], now: now) == nil)
    }

    /// The hashing is bounded: an install costs one bucket per partial release newer than it, and a
    /// backtest that would compute more than its limit is refused (`422` on `releases`) before it hashes.
    @Test func theBacktestRefusesMoreBucketsThanItsLimit() async throws {
        let now = try #require(Timestamp.parse("2026-07-01T12:00:00Z"))
        let app = AppInfo(id: "expenses", name: "Expenses")
        let catalog = AppCatalog(app: app, releases: ["1.0", "2.0", "2.1", "2.2"].map { version in
            Release(platform: "ios", version: Version(version)!, releasedAt: now.addingTimeInterval(-86_400),
                    rolloutPercent: version == "1.0" ? 100 : 40)
        })
        var random = SystemRandomNumberGenerator()
        func ids(_ count: Int) -> Backtest.InstallIDs {
            Backtest.InstallIDs(packed: (0..<16 * count).map { _ in UInt8.random(in: 0...255, using: &random) })
        }
        // 300 installs of 1.0 below three partial releases, 200 of 2.1 below one: 1,100 buckets.
        let installs = [
            (Backtest.Cohort(version: "1.0.0", osVersion: nil, channel: .live), ids(300)),
            (Backtest.Cohort(version: "2.1.0", osVersion: "17.0", channel: .live), ids(200)),
        ]
        func run(limit: Int) async throws -> BacktestReport {
            try await Backtest.run(
                app: "expenses", platform: "ios", windowDays: 7, now: now, current: catalog, proposed: catalog,
                counts: [:], installs: installs, dataAsOf: nil, maximumBuckets: limit)
        }
        let report = try await run(limit: 1_100)
        #expect(report.installs == 500)
        #expect(report.today.force + report.today.soft + report.today.none == 500)
        #expect(report.rows.map(\.installs) == [200, 300], "by version, newest first")
        do {
            _ = try await run(limit: 1_099)
            Issue.record("1,100 buckets computed under a limit of 1,099")
        } catch let error as FieldError {
            #expect(error.field == "releases")
            #expect(error.kind == .inconsistent)
            #expect(error.message.contains("1100"), "\(error.message)")
        }
    }

    @Test func liveInstallsAreNotHashedForABetaRollout() async throws {
        let now = try #require(Timestamp.parse("2026-07-01T12:00:00Z"))
        let app = AppInfo(id: "expenses", name: "Expenses")
        let catalog = AppCatalog(app: app, releases: [
            Release(platform: "ios", version: Version("1.0")!, releasedAt: now.addingTimeInterval(-86_400)),
            Release(platform: "ios", version: Version("2.0")!, releasedAt: now.addingTimeInterval(-86_400), channel: .beta,
                    rolloutPercent: 40),
        ])
        var random = SystemRandomNumberGenerator()
        func ids(_ count: Int) -> Backtest.InstallIDs {
            Backtest.InstallIDs(packed: (0..<16 * count).map { _ in UInt8.random(in: 0...255, using: &random) })
        }
        func run(_ channel: Channel, limit: Int) async throws -> BacktestReport {
            try await Backtest.run(
                app: "expenses", platform: "ios", windowDays: 7, now: now, current: catalog, proposed: catalog, counts: [:],
                installs: [(Backtest.Cohort(version: "1.0.0", osVersion: nil, channel: channel), ids(300))], dataAsOf: nil,
                maximumBuckets: limit)
        }
        // 300 live installs below a release only beta installs see: no bucket of theirs can change an answer.
        let live = try await run(.live, limit: 0)
        #expect(live.installs == 300)
        #expect(live.today.none == 300, "a live install is never offered the beta release")
        // 300 beta installs below it: one bucket each, and some of them admitted.
        let beta = try await run(.beta, limit: 300)
        #expect(beta.installs == 300)
        #expect(beta.today.none < 300 && beta.today.none > 0, "about 40 % admitted: \(beta.today)")
        await #expect(throws: FieldError.self) { try await run(.beta, limit: 299) }
    }

    @Test(arguments: try DecisionCases.load().scenarios)
    func scenario(_ scenario: DecisionCases.Scenario) throws {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.format(date))
        }
        let catalog = try ScenarioCatalog.make(scenario)
        let now = try #require(Timestamp.parse(scenario.now))
        for check in scenario.checks {
            let request = try #require(ScenarioCatalog.request(check.request), "\(check.request)")
            let decision = DecisionEngine.decide(request, catalog: catalog, now: now)
            let actual = try JSONValue.parse(try encoder.encode(decision))
            for (field, expected) in check.expect {
                #expect(actual[field] == expected, "\(check.request): \(field) is \(actual[field] ?? .null), expected \(expected)")
            }
            if check.request["previous"] != nil {
                #expect(actual["whatsNew"] != nil, "whatsNew must be present when previous is sent")
            }
        }
    }
}

/// Builds the engine's input from a scenario, the way a test reads the file.
enum ScenarioCatalog {
    static func make(_ scenario: DecisionCases.Scenario) throws -> AppCatalog {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let text = try decoder.singleValueContainer().decode(String.self)
            guard let date = Timestamp.parse(text) else { throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: text)) }
            return date
        }
        let releases = try scenario.releases.map { try decoder.decode(ScenarioRelease.self, from: try $0.data()).release }
        let policy = try decoder.decode(Policy.self, from: try scenario.policy.data())
        var updateURL: [Platform: String] = [:]
        for (platform, url) in scenario.app.updateURL { updateURL[try Platform(platform)] = url }
        var policies: [Platform: Policy] = [:]
        for platform in Set(releases.map(\.platform)).union(updateURL.keys) { policies[platform] = policy }
        return AppCatalog(
            app: AppInfo(id: try AppID(scenario.app.id), name: scenario.app.id, defaultLocale: scenario.app.defaultLocale, updateURL: updateURL),
            releases: releases, policies: policies)
    }

    static func request(_ fields: [String: String]) -> CheckRequest? {
        guard let platform = fields["platform"].flatMap(Platform.init(validating:)), let version = fields["version"].flatMap(Version.init) else { return nil }
        return CheckRequest(
            platform: platform, version: version, os: fields["os"].flatMap(Version.init), install: fields["install"],
            locale: fields["locale"], channel: fields["channel"].flatMap(Channel.init) ?? .live,
            previous: fields["previous"].flatMap(Version.init))
    }

    struct ScenarioRelease: Decodable {
        var platform: Platform
        var version: Version
        var releasedAt: Date
        var channel: Channel
        var status: ReleaseStatus
        var rolloutPercent: Double?
        var rolloutPaused: Bool?
        var minimumOSVersion: Version?
        var maximumOSVersion: Version?
        var notes: [String: [String]]?
        var updateURL: String?

        var release: Release {
            Release(
                platform: platform, version: version, releasedAt: releasedAt, channel: channel,
                minimumOSVersion: minimumOSVersion, maximumOSVersion: maximumOSVersion, notes: notes ?? [:],
                updateURL: updateURL, status: status, rolloutPercent: rolloutPercent ?? 100,
                rolloutPaused: rolloutPaused ?? false)
        }
    }
}
