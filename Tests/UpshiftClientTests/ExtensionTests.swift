import Foundation
import Testing
import UpshiftClient

/// The SDK in an app extension (a widget, a notification service): a container of its own, so no install
/// id of its own (it would count the device twice); the app's, when the app shares it through an App
/// Group (`sharedInstallIdDirectory`).
@Suite struct ExtensionTests {
    @Test func anExtensionChecksWithoutAnInstallIdAndRecordsNothing() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        var configuration = Fixture.configuration(directory: directory, server: server)
        configuration.isAppExtension = true
        let sdk = Upshift(configuration: configuration)
        await sdk.launch(migrations: [], baseline: .freshInstall)
        await sdk.record(.launched)
        #expect(await sdk.installId == nil)
        #expect(await sdk.pendingEvents == 0)
        _ = await sdk.check()
        #expect(server.checks.count == 1 && server.lastCheck("install") == nil, "the check still answers, without an install")
        await sdk.flush()
        #expect(server.events.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory.appendingPathComponent("install-id").path))
        await sdk.stop()
    }

    @Test func anExtensionRecordsUnderTheInstallIdTheAppShares() async throws {
        let group = Fixture.directory()  // the App Group container both see
        let server = FakeServer()
        var app = Fixture.configuration(directory: Fixture.directory(), server: server)
        app.sharedInstallIdDirectory = group
        let host = Upshift(configuration: app)
        await host.launch(migrations: [], baseline: .freshInstall)
        let appId = try #require(await host.installId)
        await host.stop()
        let shared = try String(contentsOf: group.appendingPathComponent("install-id"), encoding: .utf8)
        #expect(shared == appId.uuidString.lowercased())

        var widget = Fixture.configuration(directory: Fixture.directory(), server: server)
        widget.isAppExtension = true
        widget.sharedInstallIdDirectory = group
        let sdk = Upshift(configuration: widget)
        #expect(await sdk.installId == appId)
        await sdk.record(.launched)
        _ = await sdk.check()
        #expect(server.lastCheck("install") == appId.uuidString.lowercased())
        await sdk.flush()
        #expect(!server.events.isEmpty)
        #expect(server.events.allSatisfy { $0["installId"]?.stringValue == appId.uuidString.lowercased() })
        await sdk.stop()
    }
}
