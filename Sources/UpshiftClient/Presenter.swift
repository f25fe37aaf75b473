import Foundation
import Observation

/// A prompt to update: what a soft prompt or a blocking screen shows.
public struct UpdatePrompt: Sendable, Equatable {
    public var kind: PromptKind
    public var targetVersion: String
    /// Where "Update" goes: the decision's `updateURL`, else the App Store page of `appStoreId`.
    public var storeURL: URL?
    /// A soft prompt may offer "Skip this version".
    public var allowSkip: Bool
    /// The notes of the releases the update brings.
    public var notes: [VersionNotes]
    public var decision: UpshiftDecision

    public init(
        kind: PromptKind, targetVersion: String, storeURL: URL?, allowSkip: Bool, notes: [VersionNotes],
        decision: UpshiftDecision
    ) {
        self.kind = kind
        self.targetVersion = targetVersion
        self.storeURL = storeURL
        self.allowSkip = allowSkip
        self.notes = notes
        self.decision = decision
    }
}

/// What the app shows about updates now. A blocking screen wins over a soft prompt, a prompt over
/// What's New.
public enum UpdatePresentation: Sendable, Equatable {
    case none
    case softPrompt(UpdatePrompt)
    case blockingScreen(UpdatePrompt)
    case whatsNew([VersionNotes])
}

/// Turns decisions and what the user does into what to show, and records the prompt funnel: no view code,
/// so every transition is tested on Linux; the SwiftUI layer (`upshiftPrompts(_:)`) only draws
/// `presentation` and calls the actions.
@MainActor
@Observable
public final class UpshiftPresenter {
    public private(set) var presentation = UpdatePresentation.none
    public var strings: UpshiftStrings
    @ObservationIgnored private let upshift: Upshift
    @ObservationIgnored private let appStoreId: String?
    @ObservationIgnored private var decision: UpshiftDecision?
    @ObservationIgnored private var whatsNew: [VersionNotes] = []
    /// `blocked` is recorded once per foreground session (``Upshift/foregroundSession``), for the first
    /// blocking screen of the session.
    @ObservationIgnored private var blockedSession: Int?
    /// A soft prompt the view closed (``dismissed()``) that no action has claimed yet.
    @ObservationIgnored private var closedPrompt: UpdatePrompt?

    public init(upshift: Upshift, strings: UpshiftStrings = .english) {
        self.upshift = upshift
        self.appStoreId = upshift.configuration.appStoreId
        self.strings = strings
    }

    /// Shows what `decision` asks for (and What's New when no prompt is due). Call it with every decision:
    /// `follow()` does, for each one `check()` gives.
    public func show(_ decision: UpshiftDecision) async {
        self.decision = decision
        whatsNew = await upshift.whatsNew ?? []
        await present()
    }

    /// Shows every decision the SDK gives from now on (the app's checks and those on returning to the
    /// foreground). Runs until the task it runs in is cancelled.
    public func follow() async {
        for await decision in await upshift.decisions() {
            await show(decision)
        }
    }

    /// "Update": records `update_started` and answers where to go (open it at once; the event is queued
    /// on disk and sent when the app goes to the background). A soft prompt closes; a blocking screen stays.
    public func update() async -> URL? {
        guard let prompt = currentPrompt ?? claimClosedPrompt() else { return nil }
        await upshift.record(.updateStarted(kind: prompt.kind, targetVersion: prompt.targetVersion))
        if prompt.kind == .soft {
            decision = nil
            await present()
        }
        return prompt.storeURL
    }

    /// "Later" on a soft prompt: no soft prompt for the decision's `remindAfterSeconds`.
    public func later() async {
        guard let prompt = presentation.softPrompt ?? claimClosedPrompt() else { return }
        await upshift.remindLater(prompt.decision)
        decision = nil
        await present()
    }

    /// "Skip this version" on a soft prompt that allows it.
    public func skip() async {
        guard let prompt = presentation.softPrompt ?? claimClosedPrompt(), prompt.allowSkip else { return }
        await upshift.skip(prompt.decision)
        decision = nil
        await present()
    }

    /// What's New was closed: it is not shown again.
    public func whatsNewDismissed() async {
        guard case .whatsNew = presentation else { return }
        await upshift.whatsNewShown()
        whatsNew = []
        await present()
    }

    /// The view closed what it showed: a system dismissal, a swipe-down, or the close that comes with a
    /// button of the alert (SwiftUI writes `false` to the binding around the button's action, in either
    /// order). What's New is then closed for good (recorded once). A blocking screen cannot be closed: it
    /// stays. A soft prompt is taken off the screen and not shown again until the presentation changes;
    /// the action of the button that closed it (`update()`, `later()`, `skip()`) still applies to it, and
    /// when none comes (a system dismissal) it counts as "Later", recorded once.
    public func dismissed() async {
        switch presentation {
        case .whatsNew:
            await whatsNewDismissed()
        case .softPrompt(let prompt):
            closedPrompt = prompt
            decision = nil
            presentation = nextPresentation()
            // The button's action, if any, runs in the same turn of the main actor: give it that turn.
            await Task.yield()
            if let unclaimed = claimClosedPrompt(), unclaimed == prompt {
                await upshift.remindLater(prompt.decision)
            }
        case .blockingScreen, .none:
            break
        }
    }

    private func claimClosedPrompt() -> UpdatePrompt? {
        defer { closedPrompt = nil }
        return closedPrompt
    }

    private var currentPrompt: UpdatePrompt? {
        switch presentation {
        case .softPrompt(let prompt), .blockingScreen(let prompt): prompt
        case .none, .whatsNew: nil
        }
    }

    /// Moves to what is due now; a prompt that appears (or changes target) records `prompt_shown`, and the
    /// first blocking screen of the session `blocked`.
    private func present() async {
        let next = nextPresentation()
        let before = currentPrompt
        presentation = next
        guard let prompt = currentPrompt, prompt.kind != before?.kind || prompt.targetVersion != before?.targetVersion
        else { return }
        await upshift.record(.promptShown(kind: prompt.kind, targetVersion: prompt.targetVersion))
        let session = await upshift.foregroundSession
        if prompt.kind == .force, blockedSession != session {
            blockedSession = session
            await upshift.record(.blocked(targetVersion: prompt.targetVersion))
        }
    }

    private func nextPresentation() -> UpdatePresentation {
        if let decision, let server = decision.server, let target = server.latestVersion,
            decision.action != .none
        {
            let prompt = UpdatePrompt(
                kind: decision.action == .force ? .force : .soft, targetVersion: target,
                storeURL: storeURL(server.updateURL), allowSkip: server.allowSkip ?? true,
                notes: server.releaseNotes ?? [], decision: decision)
            return decision.action == .force ? .blockingScreen(prompt) : .softPrompt(prompt)
        }
        return whatsNew.isEmpty ? .none : .whatsNew(whatsNew)
    }

    private func storeURL(_ updateURL: String?) -> URL? {
        if let updateURL, let url = URL(string: updateURL) { return url }
        return appStoreId.flatMap { URL(string: "https://apps.apple.com/app/id\($0)") }
    }
}

extension UpdatePresentation {
    /// The prompt of a soft prompt, else nil (for views that bind to one kind).
    public var softPrompt: UpdatePrompt? {
        if case .softPrompt(let prompt) = self { prompt } else { nil }
    }

    /// The prompt of a blocking screen, else nil.
    public var blockingScreen: UpdatePrompt? {
        if case .blockingScreen(let prompt) = self { prompt } else { nil }
    }

    /// The notes of What's New, else nil.
    public var whatsNew: [VersionNotes]? {
        if case .whatsNew(let notes) = self { notes } else { nil }
    }
}
