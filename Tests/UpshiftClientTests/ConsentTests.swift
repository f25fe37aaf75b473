import Foundation
import Testing
import UpshiftClient

/// Opting out, forgetting, and traffic that is no user's: previews and debug builds.
@Suite struct ConsentTests {
    @Test func anOptedOutInstallRecordsNothingAndChecksAnonymously() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let sdk = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
        await sdk.record(.launched)
        await sdk.optOut()
        #expect(await sdk.pendingEvents == 0)  // what was queued is deleted
        await sdk.record(.promptShown(kind: .soft, targetVersion: "2.0"))
        #expect(await sdk.pendingEvents == 0)
        await sdk.stop()

        server.down = false
        let later = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
        #expect(await later.isOptedOut)  // kept across launches
        await later.launch()
        _ = await later.check()
        #expect(server.lastCheck("version") == "1.0")
        #expect(server.lastCheck("install") == nil)
        await later.flush()
        #expect(server.events.isEmpty)
        #expect(Fixture.bytes(of: "queue.jsonl", in: directory)?.isEmpty ?? true)

        await later.optIn()
        await later.record(.launched)
        _ = await later.check(force: true)
        #expect(server.lastCheck("install") == (await later.installId)?.uuidString.lowercased())
        await later.flush()
        #expect(server.types() == ["launched"])
        await later.stop()
    }

    @Test func forgettingDeletesTheFilesAndMakesANewInstall() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let sdk = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
        await sdk.launch()
        await sdk.record(.launched)
        let before = try #require(await sdk.installId)
        let forgotten = await sdk.forget()
        #expect(forgotten == before, "forget() returns the id it forgot, for the app's backend to erase")
        let after = try #require(await sdk.installId)
        #expect(after != before)
        #expect(await sdk.pendingEvents == 0)
        #expect(Fixture.bytes(of: "install-id", in: directory).map { String(decoding: $0, as: UTF8.self) } == after.uuidString.lowercased())
        // A new state: nothing of the old install's launches.
        let state = String(decoding: Fixture.bytes(of: "state.json", in: directory) ?? Data(), as: UTF8.self)
        #expect(!state.contains("launchedVersion"))
        await sdk.stop()
    }

    /// The storage directory may be one the app keeps its own files in (Application Support itself):
    /// `forget()` deletes the SDK's files and the copies it moved aside, nothing else.
    @Test func forgettingLeavesTheAppsOwnFiles() async throws {
        let directory = Fixture.directory()
        let images = directory.appendingPathComponent("Images")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        try Data("app data".utf8).write(to: directory.appendingPathComponent("app.sqlite"))
        try Data("jpeg".utf8).write(to: images.appendingPathComponent("photo.jpg"))
        try Data("garbage".utf8).write(to: directory.appendingPathComponent("state.json"))
        let server = FakeServer()
        server.down = true
        let sdk = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
        await sdk.launch()
        await sdk.record(.launched)
        #expect(Fixture.files(in: directory).contains { $0.hasPrefix("state.json.corrupt-") })
        await sdk.forget()
        #expect(Fixture.files(in: directory) == ["Images", "app.sqlite", "install-id", "state.json"])
        #expect(Fixture.bytes(of: "app.sqlite", in: directory) == Data("app data".utf8))
        #expect(Fixture.files(in: images) == ["photo.jpg"])
        #expect(await sdk.pendingEvents == 0)
        await sdk.stop()
    }

    @Test func aPreviewSendsNothing() async throws {
        let server = FakeServer(decision: FakeServer.decision(.force))
        var configuration = Fixture.configuration(directory: Fixture.directory(), server: server)
        configuration.isPreview = true
        let sdk = Upshift(configuration: configuration)
        await sdk.launch()
        let decision = await sdk.check()
        #expect(decision.action == .none && decision.origin == .none)
        await sdk.record(.launched)
        await sdk.flush()
        #expect(server.checks.isEmpty)
        #expect(server.events.isEmpty)
        await sdk.stop()
    }

    @Test func aDebugBuildIsNoUserUnlessTheAppSaysSo() async throws {
        let server = FakeServer()
        var configuration = Fixture.configuration(directory: Fixture.directory(), server: server)
        configuration.isDebugBuild = true
        let debug = Upshift(configuration: configuration)
        await debug.record(.launched)
        _ = await debug.check()
        await debug.flush()
        #expect(server.checks.count == 1)  // it still learns what to show …
        #expect(server.lastCheck("install") == nil)  // … as no install
        #expect(server.events.isEmpty)
        await debug.stop()

        configuration.storageDirectory = Fixture.directory()
        configuration.sendFromDebugBuilds = true
        let allowed = Upshift(configuration: configuration)
        await allowed.record(.launched)
        _ = await allowed.check()
        await allowed.flush()
        #expect(server.lastCheck("install") != nil)
        #expect(server.types() == ["launched"])
        await allowed.stop()
    }
}
