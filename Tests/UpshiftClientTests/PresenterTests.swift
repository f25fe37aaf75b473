import Foundation
import Testing
import UpshiftClient

/// Every transition of the presenter and the funnel events it records (what the server stores for them
/// is tested in `UpshiftServerTests/ClientSDKTests`).
@MainActor
@Suite struct PresenterTests {
    let server = FakeServer()
    let sdk: Upshift

    init() {
        var configuration = Fixture.configuration(directory: Fixture.directory(), server: server)
        configuration.appStoreId = "1234567890"
        sdk = Upshift(configuration: configuration)
    }

    func recorded() async -> [String] {
        await sdk.flush()
        return server.types()
    }

    @Test func aSoftPromptIsShownOnceAndLaterClosesIt() async throws {
        server.decision = FakeServer.decision(.soft, updateURL: "https://apps.apple.com/app/id42")
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        let prompt = try #require(presenter.presentation.softPrompt)
        #expect(prompt.targetVersion == "2.0" && prompt.allowSkip)
        #expect(prompt.notes == [VersionNotes(version: "2.0", notes: ["Faster."])])
        await presenter.show(await sdk.check())  // the same prompt still up: not shown again
        #expect(await recorded() == ["prompt_shown"])
        await presenter.later()
        #expect(presenter.presentation == .none)
        #expect(await recorded() == ["prompt_shown", "prompt_dismissed"])
        #expect(server.events.last?["dismissAction"] == .string("later"))
        // Held back on the device now.
        await presenter.show(await sdk.check())
        #expect(presenter.presentation == .none)
        await sdk.stop()
    }

    @Test func skipHoldsBackThatVersion() async throws {
        server.decision = FakeServer.decision(.soft)
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        await presenter.skip()
        #expect(presenter.presentation == .none)
        #expect(server.events.isEmpty)
        #expect(await recorded() == ["prompt_shown", "prompt_dismissed"])
        #expect(server.events.last?["dismissAction"] == .string("skip"))
        await presenter.show(await sdk.check(force: true))
        #expect(presenter.presentation == .none)
        await sdk.stop()
    }

    @Test func updateRecordsTheStartAndAnswersTheStoreLinkAtOnce() async throws {
        server.decision = FakeServer.decision(.soft, updateURL: "https://apps.apple.com/app/id42")
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        server.down = true  // opening the store does not wait for the network
        let url = await presenter.update()
        #expect(url == URL(string: "https://apps.apple.com/app/id42"))
        #expect(presenter.presentation == .none)
        server.down = false
        #expect(await recorded() == ["prompt_shown", "update_started"])
        #expect(server.events.last?["promptKind"] == .string("soft"))
        await sdk.stop()
    }

    @Test func aBlockingScreenStaysRecordsBlockedOncePerSessionAndFallsBackToTheAppStoreId() async throws {
        server.decision = FakeServer.decision(.force)
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        let prompt = try #require(presenter.presentation.blockingScreen)
        #expect(prompt.kind == .force)
        #expect(prompt.storeURL == URL(string: "https://apps.apple.com/app/id1234567890"))
        let url = await presenter.update()
        #expect(url == prompt.storeURL)
        #expect(presenter.presentation.blockingScreen != nil)  // no way around it but updating
        await presenter.later()  // not offered on a blocking screen: nothing happens
        #expect(presenter.presentation.blockingScreen != nil)
        // A new target is a new presentation: shown again, but `blocked` stays once per session.
        server.decision = FakeServer.decision(.force, latest: "2.1")
        await presenter.show(await sdk.check(force: true))
        #expect(await recorded() == ["prompt_shown", "blocked", "update_started", "prompt_shown"])
        await sdk.stop()
    }

    @Test func whatsNewComesAfterThePromptsAndIsShownOnce() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        let old = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server))
        await old.launch()
        await old.stop()
        let sdk = Upshift(configuration: Fixture.configuration(version: "2.0", directory: directory, server: server))
        await sdk.launch()
        var decision = FakeServer.decision(.soft, latest: "2.1")
        decision.whatsNew = [VersionNotes(version: "2.0", notes: ["Shared budgets."])]
        server.decision = decision
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        #expect(presenter.presentation.softPrompt?.targetVersion == "2.1")  // the prompt first
        await presenter.later()
        #expect(presenter.presentation == .whatsNew([VersionNotes(version: "2.0", notes: ["Shared budgets."])]))
        await presenter.whatsNewDismissed()
        #expect(presenter.presentation == .none)
        await presenter.show(await sdk.check())
        #expect(presenter.presentation == .none)
        await sdk.flush()
        #expect(server.types() == ["updated", "prompt_shown", "prompt_dismissed", "whats_new_shown"])
        await sdk.stop()
    }

    @Test func followShowsEveryDecisionTheSDKGives() async throws {
        server.decision = FakeServer.decision(.force)
        let presenter = UpshiftPresenter(upshift: sdk)
        let following = Task { await presenter.follow() }
        try await Task.sleep(for: .milliseconds(50))  // subscribed
        _ = await sdk.check()
        for _ in 0..<100 where presenter.presentation.blockingScreen == nil { try await Task.sleep(for: .milliseconds(10)) }
        #expect(presenter.presentation.blockingScreen?.targetVersion == "2.0")
        following.cancel()
        await sdk.stop()
    }

    /// SwiftUI writes `false` to a presentation's binding when the system closes it (`dismissed()`), and
    /// also around an alert button's action, in either order: the prompt is recorded once, by the action
    /// when there is one, as "Later" when there is none, and not shown again until the presentation changes.
    @Test func aSystemDismissalIsRecordedOnceAndTheButtonStillActs() async throws {
        server.decision = FakeServer.decision(.soft, updateURL: "https://apps.apple.com/app/id42")
        let presenter = UpshiftPresenter(upshift: sdk)
        await presenter.show(await sdk.check())
        // The binding's write, then the button's action (two tasks of one turn).
        async let closed: Void = presenter.dismissed()
        async let opened = presenter.update()
        _ = await closed
        #expect(await opened == URL(string: "https://apps.apple.com/app/id42"), "Update still opens the store")
        #expect(presenter.presentation == .none)
        #expect(await recorded() == ["prompt_shown", "update_started"], "no 'later' for a prompt the user updated from")

        // A system dismissal with no button: "Later", once, and the prompt stays away.
        await presenter.show(await sdk.check(force: true))
        #expect(presenter.presentation.softPrompt != nil)
        await presenter.dismissed()
        await presenter.dismissed()  // SwiftUI may write false twice
        #expect(presenter.presentation == .none)
        await presenter.show(await sdk.check(force: true))
        #expect(presenter.presentation == .none, "not shown again: reminded later")
        #expect(await recorded() == ["prompt_shown", "update_started", "prompt_shown", "prompt_dismissed"])
        #expect(server.events.last?["dismissAction"] == .string("later"))

        await sdk.stop()

        // The action first, then the binding's write: nothing more (a new install, nothing held back).
        let other = FakeServer()
        other.decision = FakeServer.decision(.soft)
        let fresh = Upshift(configuration: Fixture.configuration(directory: Fixture.directory(), server: other))
        let third = UpshiftPresenter(upshift: fresh)
        await third.show(await fresh.check())
        await third.skip()
        await third.dismissed()
        await fresh.flush()
        #expect(other.types() == ["prompt_shown", "prompt_dismissed"])
        #expect(other.events.last?["dismissAction"] == .string("skip"))
        await fresh.stop()
    }

    /// A blocking screen cannot be closed by the view, and leaves when the force is lifted: to nothing, or
    /// to a soft prompt. `blocked` is recorded once per foreground session.
    @Test func aBlockingScreenStaysUntilTheForceIsLiftedAndBlockedCountsPerSession() async throws {
        server.decision = FakeServer.decision(.force)
        let presenter = UpshiftPresenter(upshift: sdk)
        await sdk.enteredForeground()
        await presenter.show(await sdk.check(force: true))
        await presenter.dismissed()
        #expect(presenter.presentation.blockingScreen != nil, "a blocking screen stays")
        // Lifted to a soft prompt, then to nothing.
        server.decision = FakeServer.decision(.soft)
        await presenter.show(await sdk.check(force: true))
        #expect(presenter.presentation.softPrompt?.targetVersion == "2.0")
        server.decision = FakeServer.decision(.none)
        await presenter.show(await sdk.check(force: true))
        #expect(presenter.presentation == .none)
        // Forced again in the same session: shown, not `blocked` again; in the next session: `blocked`.
        server.decision = FakeServer.decision(.force)
        await presenter.show(await sdk.check(force: true))
        await sdk.enteredBackground()
        await sdk.enteredForeground()
        server.decision = FakeServer.decision(.force, latest: "2.1")
        await presenter.show(await sdk.check(force: true))
        let types = await recorded()
        #expect(types.filter { $0 == "blocked" }.count == 2, "\(types)")
        await sdk.stop()
    }

    /// What the presenter shows can be made by the app too (previews and tests of its own screens).
    @Test func promptsCanBeMadeForPreviews() {
        let prompt = UpdatePrompt(
            kind: .soft, targetVersion: "2.0", storeURL: URL(string: "https://apps.apple.com/app/id1234567890"),
            allowSkip: true, notes: VersionNotes.previewNotes, decision: .previewSoft)
        #expect(UpdatePresentation.softPrompt(prompt).softPrompt == prompt)
        #expect(UpdatePresentation.softPrompt(prompt).blockingScreen == nil)
        #expect(UpdatePresentation.whatsNew(prompt.notes).whatsNew?.count == 2)
    }

    @Test func textsComeFromAnOverridableTable() {
        var strings = UpshiftStrings.english
        #expect(strings.fill(strings.softMessage, version: "2.0") == "Version 2.0 is available.")
        strings.softMessage = "Version {version} ist da."
        let presenter = UpshiftPresenter(upshift: sdk, strings: strings)
        #expect(presenter.strings.fill(presenter.strings.softMessage, version: "2.0") == "Version 2.0 ist da.")
    }
}
