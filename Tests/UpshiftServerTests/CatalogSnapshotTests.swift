import Foundation
import Metrics
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

@testable import UpshiftServer

/// A catalog reload never replaces an app with an older catalog of it: the reload after a write, the one
/// on a NOTIFY and the poll's run at once and can finish in any order. And a write costs the app it
/// changed: only that app is read again, and only its cached answers go cold.
@Suite(.serverTimeLimit) struct CatalogSnapshotTests {
    static func catalog(_ id: AppID = "expenses", minimum: String) -> [AppID: AppCatalog] {
        [id: AppCatalog(app: AppInfo(id: id, name: id.rawValue), policies: ["ios": Policy(minimumVersion: Version(minimum))])]
    }

    static func minimum(_ snapshot: CatalogSnapshot, _ id: AppID = "expenses") -> Version? {
        snapshot.app(id)?.catalog.policies["ios"]?.minimumVersion
    }

    @Test func aLoadOfAnOlderHeadChangesNothingAndOnlyTheAppTakenGoesCold() {
        let snapshot = CatalogSnapshot()
        let both = Self.catalog(minimum: "2.0").merging(Self.catalog("notes", minimum: "1.0")) { $1 }
        #expect(snapshot.update(apps: both, heads: ["expenses": 7, "notes": 3]) == ["expenses", "notes"])
        #expect(snapshot.version == 10)
        let generation = snapshot.app("expenses")?.generation
        let notes = snapshot.app("notes")?.generation
        // A reload that read head 6 finishes after the one that read 7.
        #expect(snapshot.update(apps: Self.catalog(minimum: "1.0"), heads: ["expenses": 6]).isEmpty)
        #expect(snapshot.version == 10)
        #expect(Self.minimum(snapshot) == Version("2.0"))
        #expect(snapshot.app("expenses")?.generation == generation, "cached answers of the kept load stay valid")
        // The same head again (the reload after a write and the one on its NOTIFY) changes nothing either.
        #expect(snapshot.update(apps: Self.catalog(minimum: "2.0"), heads: ["expenses": 7]).isEmpty)
        #expect(snapshot.app("expenses")?.generation == generation)
        // A newer head is taken, for that app alone: the other app's answers stay cached.
        #expect(snapshot.newer(["expenses": 8, "notes": 3]) == ["expenses": 8])
        #expect(snapshot.update(apps: Self.catalog(minimum: "3.0"), heads: ["expenses": 8]) == ["expenses"])
        #expect(snapshot.version == 11)
        #expect(Self.minimum(snapshot) == Version("3.0"))
        #expect(snapshot.app("expenses")?.generation != generation)
        #expect(snapshot.app("notes")?.generation == notes)
        // An app that cannot be read keeps its last good catalog and is not read again until it moves.
        #expect(snapshot.update(apps: [:], heads: ["notes": 4], keeping: ["notes"]).isEmpty)
        #expect(Self.minimum(snapshot, "notes") == Version("1.0") && snapshot.undecodableCount == 1)
        #expect(snapshot.newer(["expenses": 8, "notes": 4]).isEmpty)
    }

    /// Loads of the real store, taken before and after a policy write, installed in the wrong order.
    @Test func aReloadThatFinishesLateKeepsTheNewerCatalog() async throws {
        let harness = try await Harness.make()
        try await harness.sql { client in
            let store = CatalogStore(client: client, logger: TestEnvironment.logger)
            let snapshot = CatalogSnapshot()
            let service = CatalogSnapshotService(
                snapshot: snapshot, store: store, database: harness.database, readiness: Readiness(required: []), metrics: NOOPMetricsHandler.instance,
                logger: TestEnvironment.logger)
            try await service.load()
            // A reload reads the heads and loads, and is slow to finish.
            let early = try await store.heads()
            let earlyLoad = try await store.load(only: ["expenses"])
            #expect(earlyLoad.apps["expenses"]?.policies["ios"] == nil)
            _ = try await store.replacePolicy(
                appId: "expenses", platform: "ios", Policy(minimumVersion: Version("2.0")), expectedRevision: 0,
                actor: "tests", reason: nil, now: Date())
            // Another reload (the write's, or its NOTIFY's) reads the new head and finishes first.
            #expect(try await service.refresh(reason: "write") == ["expenses"])
            let written = snapshot.version
            #expect(written > early.values.reduce(0, +))
            #expect(Self.minimum(snapshot) == Version("2.0"))
            // Then the slow one finishes: discarded.
            #expect(snapshot.update(apps: earlyLoad.apps, heads: early).isEmpty)
            #expect(snapshot.version == written)
            #expect(Self.minimum(snapshot) == Version("2.0"), "the snapshot went back to the catalog before the write")
            // A reload at the current heads reads nothing.
            #expect(try await service.refresh(reason: "notify").isEmpty)
            #expect(snapshot.version == written)
        }
    }

    /// Over HTTP, with twenty apps: a write to one app leaves the cached check answers of the others warm
    /// (their next checks are cache hits) while that app's checks see the write at once.
    @Test func aWriteToOneAppLeavesEveryOtherAppsCachedAnswersWarm() async throws {
        let harness = try await Harness.make()
        let others = (1...20).map { AppID(validating: "app\($0)")! }
        try await harness.sql { client in
            let store = CatalogStore(client: client, logger: TestEnvironment.logger)
            for id in others {
                _ = try await store.createApp(AppInfo(id: id, name: id.rawValue), actor: "tests", reason: nil, now: harness.clock.now())
            }
        }
        try await harness.run { server in
            func check(_ app: AppID) async throws -> Server.Reply {
                try await server.request(.GET, "/v1/apps/\(app)/check?platform=ios&version=1.0")
            }
            let release: JSONValue = .object([
                "platform": .string("ios"), "version": .string("2.0.0"), "releasedAt": .string("2026-01-01T00:00:00Z"),
            ])
            #expect(try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release).status == 201)
            #expect(try await check("expenses").value()["action"] != .string("force"))
            for app in others { #expect(try await check(app).status == 200) }  // cached
            let hits = #"upshift_check_cache_lookups_total{result="hit"}"#
            let misses = #"upshift_check_cache_lookups_total{result="miss"}"#
            let hitsBefore = try await server.metric(hits) ?? 0
            let missesBefore = try await server.metric(misses) ?? 0
            #expect(missesBefore >= Double(others.count))
            let written = try await server.send(
                .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey,
                json: .object(["enabled": .bool(true), "minimumVersion": .string("2.0")]), headers: [("If-Match", "\"0\"")])
            #expect(written.status == 200)
            #expect(try await check("expenses").value()["action"] == .string("force"))
            for app in others { #expect(try await check(app).status == 200) }
            #expect(try await server.metric(hits) == hitsBefore + Double(others.count), "every other app's answer was still cached")
            #expect(try await server.metric(misses) == missesBefore + 1, "only the written app's answer was computed again")
        }
    }
}
