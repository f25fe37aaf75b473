import Foundation
import Metrics
import Testing
import UpshiftCore
import UpshiftStore
import UpshiftTestSupport

@testable import UpshiftServer

/// A catalog reload never replaces the snapshot with an older catalog version: the reload after a
/// write, the one on a NOTIFY and the poll's run at once and can finish in any order.
@Suite struct CatalogSnapshotTests {
    static func catalog(minimum: String) -> [String: AppCatalog] {
        ["expenses": AppCatalog(app: AppInfo(id: "expenses", name: "Expenses"), policies: ["ios": Policy(minimumVersion: Version(minimum))])]
    }

    static func minimum(_ snapshot: CatalogSnapshot) -> Version? {
        snapshot.app("expenses")?.catalog.policies["ios"]?.minimumVersion
    }

    @Test func aLoadOfAnOlderVersionChangesNothing() {
        let snapshot = CatalogSnapshot()
        #expect(snapshot.replace(apps: Self.catalog(minimum: "2.0"), version: 7))
        let generation = snapshot.app("expenses")?.generation
        // A reload that read version 6 finishes after the one that read 7.
        #expect(!snapshot.replace(apps: Self.catalog(minimum: "1.0"), version: 6))
        #expect(snapshot.version == 7)
        #expect(Self.minimum(snapshot) == Version("2.0"))
        #expect(snapshot.app("expenses")?.generation == generation, "cached answers of the kept load stay valid")
        // The same version again (the reload after a write and the one on its NOTIFY, both finished)
        // changes nothing either: the answers cached for it stay valid. A newer one is taken.
        #expect(!snapshot.replace(apps: Self.catalog(minimum: "2.0"), version: 7))
        #expect(snapshot.app("expenses")?.generation == generation)
        #expect(snapshot.replace(apps: Self.catalog(minimum: "3.0"), version: 8))
        #expect(snapshot.version == 8)
        #expect(Self.minimum(snapshot) == Version("3.0"))
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
            // A reload reads the version and loads, and is slow to finish.
            let early = try await store.version()
            let earlyLoad = try await store.loadAll()
            #expect(earlyLoad.apps["expenses"]?.policies["ios"] == nil)
            _ = try await store.replacePolicy(
                appId: "expenses", platform: "ios", Policy(minimumVersion: Version("2.0")), expectedRevision: 0,
                actor: "tests", reason: nil, now: Date())
            // Another reload (the write's, or its NOTIFY's) reads the new version and finishes first.
            await service.reload(reason: "write")
            let written = snapshot.version
            #expect(written > early)
            #expect(Self.minimum(snapshot) == Version("2.0"))
            // Then the slow one finishes: discarded.
            #expect(!service.install(earlyLoad, version: early))
            #expect(snapshot.version == written)
            #expect(Self.minimum(snapshot) == Version("2.0"), "the snapshot went back to the catalog before the write")
            // A reload at the current version changes nothing either.
            await service.reload(reason: "notify")
            #expect(snapshot.version == written)
            #expect(Self.minimum(snapshot) == Version("2.0"))
        }
    }
}
