import Foundation
import UpshiftWire

/// What the app's lifecycle tells the SDK (`Upshift.follow(_:)`).
public enum AppLifecycleEvent: Sendable, Equatable {
    case foreground, background
}

/// The app's lifecycle: a check on returning to the foreground, a flush on going to the background, and
/// the foreground session whose end without the app saying so is `abnormal_exit`.
extension Upshift {
    /// Follows the app's lifecycle: on returning to the foreground a check (cached; forced while the
    /// current decision is a force, so that a lifted force clears at once), published on `decisions()`;
    /// on going to the background a flush, awaited inside `whileInBackground` (a background task on iOS,
    /// which cancels the flush when the system ends the background time: unsent events stay queued).
    /// Ends when `events` ends. On Apple platforms `followSystemLifecycle()` passes the system's notifications.
    ///
    /// With `tracksSessions` (the default), the app is taken to be in the foreground when following starts
    /// and on each `.foreground`, until `.background`: a process that ends in between (a crash, a kill in
    /// the foreground) is reported by the next one as `abnormal_exit`, once, with the app version and build
    /// of that session and the time it began.
    public func follow<Events: AsyncSequence & Sendable>(
        _ events: Events, tracksSessions: Bool = true,
        whileInBackground: @escaping @Sendable (_ work: @escaping @Sendable () async -> Void) async -> Void = { await $0() }
    ) async where Events.Element == AppLifecycleEvent {
        foregroundSession += 1
        if tracksSessions { openSession() }
        do {
            for try await event in events {
                switch event {
                case .foreground:
                    foregroundSession += 1
                    if tracksSessions { openSession() }
                    _ = await check(force: current?.action == .force)
                case .background:
                    closeSession()
                    await whileInBackground { await self.flush() }
                }
            }
        } catch {
            configuration.log("lifecycle events ended: \(error)")
        }
    }

    /// The app came to the foreground, for an app that does not use `follow(_:)`: a session opens (see
    /// `follow(_:tracksSessions:whileInBackground:)`) and a check runs, as `follow(_:)` does on `.foreground`.
    public func enteredForeground() async {
        foregroundSession += 1
        openSession()
        _ = await check(force: current?.action == .force)
    }

    /// The app went to the background: the session closes and the queue is sent (what `follow(_:)` does
    /// on `.background`).
    public func enteredBackground() async {
        closeSession()
        await flush()
    }

    /// Saves the open session at once, so that a crash before the app goes to the background is found.
    func openSession() {
        takeFiles()
        state.session = ClientState.Session(
            appVersion: configuration.appVersion, build: configuration.build, since: configuration.clock.now())
        persistState()
    }

    func closeSession() {
        takeFiles()
        guard state.session != nil else { return }
        state.session = nil
        persistState()
    }

    /// Queues `abnormal_exit` for a session a process before this one left open. Its id comes from the
    /// install and the session (UUIDv5): a process killed before it saved the closed session queues it
    /// again with the same id, and the server counts it once.
    func recordAbnormalExit(of session: ClientState.Session) {
        let id = UUIDv5.make(
            "abnormal_exit|\(installIdentifier?.uuidString ?? "")|\(session.appVersion)|\(Timestamp.format(session.since))")
        record(.abnormalExit, fields: [:], id: id, session: session)
    }
}

/// Background time the system grants for a flush (a UIKit background task): `begin` asks for it, handing
/// the system a handler for when the time is up, and `end` gives it back. The work runs in a task of its
/// own; when the time is up it is cancelled (a cancelled flush keeps its events queued) and the grant is
/// ended from the handler itself, at once, as UIKit requires before it suspends the app; otherwise it is
/// ended when the work is done. Ended exactly once either way.
enum BackgroundTime {
    static func run<Grant>(
        begin: @escaping @MainActor @Sendable (_ expired: @escaping @MainActor @Sendable () -> Void) -> Grant,
        end: @escaping @MainActor @Sendable (Grant) -> Void,
        _ work: @escaping @Sendable () async -> Void
    ) async {
        let task = Task { await work() }
        let grant = Granted<Grant>()
        await MainActor.run {
            grant.value = begin {
                task.cancel()
                if let value = grant.take() { end(value) }
            }
        }
        await task.value
        await MainActor.run {
            if let value = grant.take() { end(value) }
        }
    }

    /// The grant, until it is ended.
    @MainActor private final class Granted<Grant> {
        var value: Grant?

        nonisolated init() {}

        func take() -> Grant? {
            defer { value = nil }
            return value
        }
    }
}
