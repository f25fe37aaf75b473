/// What the app's lifecycle tells the SDK (`Upshift.follow(_:)`).
public enum AppLifecycleEvent: Sendable, Equatable {
    case foreground, background
}

/// The app's lifecycle: a check on returning to the foreground, a flush on going to the background.
extension Upshift {
    /// Follows the app's lifecycle: on returning to the foreground a check (cached; forced while the
    /// current decision is a force, so that a lifted force clears at once), published on `decisions()`;
    /// on going to the background a flush, awaited inside `whileInBackground` (a background task on iOS,
    /// which cancels the flush when the system ends the background time: unsent events stay queued).
    /// Ends when `events` ends. On Apple platforms `followSystemLifecycle()` passes the system's notifications.
    public func follow<Events: AsyncSequence & Sendable>(
        _ events: Events,
        whileInBackground: @escaping @Sendable (_ work: @escaping @Sendable () async -> Void) async -> Void = { await $0() }
    ) async where Events.Element == AppLifecycleEvent {
        do {
            for try await event in events {
                switch event {
                case .foreground: _ = await check(force: current?.action == .force)
                case .background: await whileInBackground { await self.flush() }
                }
            }
        } catch {
            configuration.log("lifecycle events ended: \(error)")
        }
    }

    /// Sends when the app goes to the background (what `follow(_:)` does on `.background`).
    public func enteredBackground() async { await flush() }
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
