import Foundation
import PostgresNIO
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// The App Store import: `upshift releases import` and the store sync read Apple's
/// lookup, here a fake store on loopback that answers as each test says.
@Suite(.tags(.timed), .serverTimeLimit) struct AppStoreImportTests {
    static let appId: AppID = "expenses"
    static let bundleId = "com.example.expenses"
    static let tvBundleId = "com.example.expenses.tv"

    /// A fresh database with the app `expenses`, bundle ids for iOS and tvOS, and an admin token.
    static func harness(now: Date = Date()) async throws -> Harness {
        let harness = try await Harness.empty(now: now)
        try await harness.sql { client in
            _ = try await CatalogStore(client: client, logger: TestEnvironment.logger).createApp(
                AppInfo(
                    id: appId, name: "Expenses", defaultLocale: "en",
                    updateURL: ["ios": "https://apps.apple.com/app/id1234567890"], storeId: ["ios": "1234567890"],
                    bundleId: ["ios": bundleId, "tvos": tvBundleId]),
                actor: "tests", reason: nil, now: now)
        }
        return harness
    }

    static func pool(_ harness: Harness) -> DatabasePool {
        DatabasePool(name: "test", settings: harness.database, connections: 2, bounds: nil, logger: TestEnvironment.logger)
    }

    /// Runs `body` with an importer that asks `store`, on a pool of the harness's database.
    static func withImporter<T: Sendable>(
        _ harness: Harness, store: FakeAppStore, timeout: Duration = .seconds(10),
        _ body: @Sendable (AppStoreImporter, CatalogStore) async throws -> T
    ) async throws -> T {
        let pool = Self.pool(harness)
        var settings = AppStoreImporter.Settings()
        settings.lookupURL = store.lookupURL
        settings.timeout = timeout
        let catalog = CatalogStore(pool: pool, logger: TestEnvironment.logger)
        let importer = AppStoreImporter(settings: settings, catalog: catalog, clock: harness.clock, logger: TestEnvironment.logger)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                await pool.client.run()
                return nil
            }
            defer { group.cancelAll() }
            return try await body(importer, catalog)
        }
    }

    @Test func theStoresVersionIsAddedOnceWithItsDateMinimumOSAndNotes() async throws {
        let harness = try await Self.harness()
        try await FakeAppStore.run { store in
            store.answer(
                Self.bundleId,
                with: .json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5", released: "2026-11-20T16:47:33Z")))
            try await Self.withImporter(harness, store: store) { importer, catalog in
                let result = try await importer.run(appId: Self.appId, platform: "ios")
                guard case .added(let release, let revision) = result else {
                    Issue.record("expected the release to be added, got \(result)")
                    return
                }
                #expect(revision == 1)
                let stored = try #require(try await catalog.app(id: Self.appId)?.release(platform: "ios", version: Version("2.5")!))
                #expect(stored.version == release.version && stored.revision == revision)
                #expect(stored.version.text == "2.5")
                #expect(stored.releasedAt == Timestamp.parse("2026-11-20T16:47:33Z"))
                #expect(stored.minimumOSVersion == Version("16.0"))
                #expect(stored.notes == ["en": ["Faster sync", "Fixes a crash"]])
                #expect(stored.channel == .live && stored.status == .live && stored.rolloutPercent == 100)
                let history = try await catalog.history(appId: Self.appId, before: nil, limit: 1)
                #expect(history.first?.actor == "store-sync")
                #expect(history.first?.reason == "store import")
                #expect(history.first?.releaseVersion == "2.5")

                // Asked again, and with the same version spelt another way: nothing more is added.
                #expect(try await importer.run(appId: Self.appId, platform: "ios") == .present(Version("2.5")!))
                store.answer(Self.bundleId, with: .json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5.0")))
                #expect(try await importer.run(appId: Self.appId, platform: "ios") == .present(Version("2.5")!))
                #expect(try await catalog.history(appId: Self.appId, before: nil, limit: 10).count == 2)
            }
            #expect(store.requests(for: Self.bundleId).count == 3)
            // tvOS asks the lookup for tvOS software.
            store.answer(Self.tvBundleId, with: .json(FakeAppStore.listing(bundleId: Self.tvBundleId, version: "1.0")))
            try await Self.withImporter(harness, store: store) { importer, _ in
                guard case .added = try await importer.run(appId: Self.appId, platform: "tvos") else {
                    Issue.record("the tvOS version was not added")
                    return
                }
            }
            #expect(store.requests(for: Self.tvBundleId).map(\.entity) == ["tvSoftware"])
        }
    }

    /// What the store cannot answer, or answers wrongly, adds nothing and says why; a slow or endless
    /// answer is given up on within its bound, and an oversized one at its byte limit.
    @Test func whatTheStoreCannotAnswerAddsNothingAndSaysWhy() async throws {
        let harness = try await Self.harness()
        // An answer that does not come whole in time, asked with a 2 s bound.
        let slow: [(FakeAppStore.Answer, expected: String)] = [
            (.slow(.seconds(30), FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5")), "no whole answer within")
        ]
        // Answers refused for what they hold or for their size, asked with a bound in time far above what
        // reading them takes even on a busy machine, so that what they hold is what refuses them (with the
        // 2 s of the slow case, a loaded CI ran out of time first, on 1 MiB and once even on a small answer).
        let refused: [(FakeAppStore.Answer, expected: String)] = [
            (.status(500), "answered 500"),
            (.status(404), "answered 404"),
            (.json("<html>rate limited</html>"), "not JSON"),
            (.json(#"{"resultCount":1}"#), "no results array"),
            (.json(#"{"resultCount":1,"results":[{"version":"2.5"}]}"#), "no bundleId"),
            (.json(FakeAppStore.listing(bundleId: "com.example.other", version: "2.5")), "not the app's"),
            (.json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5 (beta)")), "not a valid version"),
            (.json(FakeAppStore.listing(bundleId: Self.bundleId, version: "v2.5")), "not a valid version"),
            (.json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5", released: "yesterday")), "currentVersionReleaseDate"),
            (.json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5", minimumOS: "sixteen")), "minimumOsVersion"),
            (.oversized(bytes: 2 << 20, declared: true), "more than 1048576 bytes"),
            (.oversized(bytes: 2 << 20, declared: false), "more than 1048576 bytes"),
        ]
        @Sendable func ask(_ importer: AppStoreImporter, _ answer: FakeAppStore.Answer, expecting expected: String, store: FakeAppStore) async throws {
            store.answer(Self.bundleId, with: answer)
            let started = ContinuousClock.now
            let result = try await importer.run(appId: Self.appId, platform: "ios")
            let took = ContinuousClock.now - started
            switch result {
            case .failed(let reason), .refused(let reason):
                #expect(reason.contains(expected), "\(answer): \(reason)")
            default:
                Issue.record("\(answer) gave \(result)")
            }
            // Given up on long before the slow answer (30 s) or the whole 2 MiB body would come.
            #expect(took < .seconds(15), "\(answer) took \(took)")
        }
        try await FakeAppStore.run { store in
            try await Self.withImporter(harness, store: store, timeout: .seconds(60)) { importer, catalog in
                for (answer, expected) in refused { try await ask(importer, answer, expecting: expected, store: store) }
                store.answer(Self.bundleId, with: .json(FakeAppStore.empty))
                #expect(try await importer.run(appId: Self.appId, platform: "ios") == .notListed)
                // An app without a bundle id for a platform, or a platform the lookup does not know, asks nothing.
                guard case .refused(let macOS) = try await importer.run(appId: Self.appId, platform: "macos"),
                    case .refused(let android) = try await importer.run(appId: Self.appId, platform: "android")
                else {
                    Issue.record("macOS or Android was not refused")
                    return
                }
                #expect(macOS.contains("no bundle id for macos"))
                #expect(android.contains("not android"))
                #expect(try await catalog.app(id: Self.appId)?.releases.isEmpty == true)
            }
            try await Self.withImporter(harness, store: store, timeout: .seconds(2)) { importer, catalog in
                for (answer, expected) in slow { try await ask(importer, answer, expecting: expected, store: store) }
                #expect(try await catalog.app(id: Self.appId)?.releases.isEmpty == true)
            }
            #expect(store.requests(for: Self.bundleId).count == slow.count + refused.count + 1)
        }
    }

    /// The background job: the check offers what it added; the store is asked at most once per interval
    /// of the application's clock, and a failing answer backs off; it is counted in `/metrics`.
    @Test func theSyncAsksOncePerIntervalBacksOffOnFailureAndTheCheckOffersWhatItAdded() async throws {
        let now = Timestamp.parse("2026-11-26T12:00:00Z")!
        let harness = try await Self.harness(now: now)
        try await FakeAppStore.run { store in
            store.answer(
                Self.bundleId,
                with: .json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5", released: "2026-11-21T12:00:00Z")))
            store.answer(Self.tvBundleId, with: .status(503))
            var configuration = harness.configuration()
            var sync = AppStoreSyncSettings(interval: .seconds(3_600))
            sync.importer.lookupURL = store.lookupURL
            sync.longestPause = .milliseconds(100)  // a round every 100 ms: only the schedule holds requests back
            configuration.storeSync = sync
            try await harness.run(configuration) { server in
                let check = "/v1/apps/\(Self.appId)/check?platform=ios&version=2.4"
                try await Waits.until("the check offers the store's version", timeout: .seconds(15)) {
                    let answer = try await server.request(.GET, check).value()
                    return answer["latestVersion"]?.stringValue == "2.5" && answer["action"]?.stringValue == "soft"
                }
                try await Waits.until("the tvOS lookup was asked", timeout: .seconds(15)) {
                    !store.requests(for: Self.tvBundleId).isEmpty
                }
                // Many rounds, the clock standing still: no second request.
                try await Task.sleep(for: .seconds(1))
                #expect(store.requests(for: Self.bundleId).count == 1)
                #expect(store.requests(for: Self.tvBundleId).count == 1)

                // An interval later iOS is asked again; tvOS, which failed, waits twice as long.
                harness.clock.advance(by: 3_600)
                try await Waits.until("iOS asked again", timeout: .seconds(15)) { store.requests(for: Self.bundleId).count == 2 }
                try await Task.sleep(for: .seconds(1))
                #expect(store.requests(for: Self.tvBundleId).count == 1)
                harness.clock.advance(by: 3_600)
                try await Waits.until("tvOS asked again", timeout: .seconds(15)) {
                    store.requests(for: Self.tvBundleId).count == 2
                }
                // Two failures in a row: four intervals.
                harness.clock.advance(by: 3 * 3_600)
                try await Task.sleep(for: .seconds(1))
                #expect(store.requests(for: Self.tvBundleId).count == 2)
                harness.clock.advance(by: 3_600)
                try await Waits.until("tvOS asked a third time", timeout: .seconds(15)) {
                    store.requests(for: Self.tvBundleId).count == 3
                }

                // The outcome is recorded once the answer is read, a moment after the store saw the request.
                try await Waits.until("the third failure recorded", timeout: .seconds(15)) {
                    try await harness.count(
                        "SELECT failures::int8 FROM store_sync WHERE app_id = \(Self.appId) AND platform = 'tvos'") == 3
                }
                let metrics = try await server.request(.GET, "/metrics").text
                #expect(metrics.contains(#"upshift_store_sync_total{outcome="added"} 1"#), "\(metrics)")
                #expect(metrics.contains(#"upshift_store_sync_total{outcome="failed"} 3"#), "\(metrics)")
            }
        }
    }

    /// While the store has not answered, neither instance's check waits for it, and only one instance
    /// asks it: the one holding the sync's lock (the other's rounds find it taken).
    @Test func aSlowStoreDelaysNothingAndTwoInstancesAskItOnce() async throws {
        let harness = try await Self.harness()
        try await FakeAppStore.run { store in
            store.answer(Self.bundleId, with: .held(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5")))
            var configuration = harness.configuration()
            var sync = AppStoreSyncSettings(interval: .seconds(3_600))
            sync.importer.lookupURL = store.lookupURL
            sync.importer.timeout = .seconds(120)  // the test decides when the store answers
            sync.longestPause = .milliseconds(100)
            configuration.storeSync = sync
            let both = configuration
            try await harness.run(both) { first in
                try await harness.run(both) { second in
                    try await Waits.until("the store was asked", timeout: .seconds(30)) {
                        !store.requests(for: Self.bundleId).isEmpty
                    }
                    // The store has not answered: both instances answer the check from the catalog they have.
                    for server in [first, second] {
                        let reply = try await server.request(.GET, "/v1/apps/\(Self.appId)/check?platform=ios&version=2.4")
                        #expect(reply.status == 200)
                        #expect(try reply.value()["latestVersion"]?.stringValue != "2.5")
                    }
                    let holders = try await harness.count(
                        """
                        SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid
                        WHERE l.locktype = 'advisory' AND l.granted AND a.datname = current_database()
                          AND a.application_name = 'upshift-store-sync'
                        """)
                    #expect(holders == 1)
                    try await Task.sleep(for: .seconds(1))  // ten rounds of each instance
                    #expect(store.requests(for: Self.bundleId).count == 1)
                    store.letHeldAnswersGo()
                    try await Waits.until("the store's version was added", timeout: .seconds(30)) {
                        try await second.request(.GET, "/v1/apps/\(Self.appId)/check?platform=ios&version=2.4")
                            .value()["latestVersion"]?.stringValue == "2.5"
                    }
                    try await Task.sleep(for: .seconds(1))
                    #expect(store.requests(for: Self.bundleId).count == 1)
                }
            }
        }
    }

    /// `upshift releases import`: the release added and said so; a failure named, exit non-zero.
    @Test func theCommandAddsTheStoresVersionOrSaysWhyNot() async throws {
        let harness = try await Self.harness()
        let url = harness.databaseURL
        try await FakeAppStore.run { store in
            store.answer(Self.bundleId, with: .json(FakeAppStore.listing(bundleId: Self.bundleId, version: "2.5")))
            let arguments = ["releases", "import", "--app", Self.appId.rawValue, "--platform", "ios", "--lookup-url", store.lookupURL]
            let added = try await BinaryTests.command(arguments, databaseURL: url)
            #expect(added.status == 0, "\(added.error)")
            #expect(added.output.contains("added ios 2.5 to expenses from the App Store (revision 1)"), "\(added.output)")
            let again = try await BinaryTests.command(arguments, databaseURL: url)
            #expect(again.status == 0)
            #expect(again.output.contains("is in the catalog already"), "\(again.output)")
            store.answer(Self.bundleId, with: .status(500))
            let failed = try await BinaryTests.command(arguments, databaseURL: url)
            #expect(failed.status != 0)
            #expect(failed.error.contains("nothing added:") && failed.error.contains("answered 500"), "\(failed.error)")
            let wrongURL = try await BinaryTests.command(
                ["releases", "import", "--app", Self.appId.rawValue, "--lookup-url", "itunes.apple.com/lookup"], databaseURL: url)
            #expect(wrongURL.status != 0)
            #expect(wrongURL.error.contains("--lookup-url"), "\(wrongURL.error)")
        }
    }

    @Test func failuresDoubleTheWaitUpToADay() {
        let hourly = AppStoreSyncSettings(interval: .seconds(3_600))
        #expect((0...6).map { hourly.delay(failures: $0) } == [1, 2, 4, 8, 16, 24, 24].map { Duration.seconds($0 * 3_600) })
        // An interval of a day or more does not grow.
        let daily = AppStoreSyncSettings(interval: .seconds(2 * 86_400))
        #expect(daily.delay(failures: 5) == .seconds(2 * 86_400))
        #expect(hourly.delay(failures: Int.max) == .seconds(86_400))
    }
}
