import Foundation

/// Consent: opting out and in, forgetting the install, and builds whose traffic is no user's.
extension Upshift {
    /// The user opted out: nothing is recorded from now on, queued events are deleted, and checks are sent
    /// without the install id (the server records nothing for them). Kept across launches.
    public func optOut() {
        takeFiles()
        state.optedOut = true
        persistState()
        persistQueue(queue.removeAll())
    }

    /// Recording resumes.
    public func optIn() {
        takeFiles()
        state.optedOut = false
        persistState()
    }

    /// Deletes everything the SDK stored and starts over as a new install (a new install id), e.g. when
    /// the user asks to be forgotten. Events not yet sent are deleted with the rest. Only the SDK's own
    /// files go: the storage directory and whatever else the app keeps in it stay. Returns the install id
    /// it forgot (nil when none could be read), so that the app's backend can ask the server to erase
    /// what it holds of that install.
    @discardableResult
    public func forget() -> UUID? {
        takeFiles()
        let forgotten = installIdentifier
        unread = nil
        do { try files.removeAll() } catch {
            configuration.log("cannot delete the SDK's files: \(error)")
        }
        queue = EventQueue()
        state = ClientState()
        savedState = nil
        storageReady = false
        history = .none
        installIdentifier = nil
        current = nil
        if let loaded = Self.read(files, configuration) { use(loaded) }
        return forgotten
    }

    /// Whether events and install ids go to the server: not after `optOut()`, never from a SwiftUI
    /// preview, from a debug build only when the app allows it (`sendFromDebugBuilds`), and from an app
    /// extension only under the install id the app shares (`sharedInstallIdDirectory`).
    var recording: Bool {
        !state.optedOut && configuration.sendsFromThisBuild && (!configuration.isAppExtension || installIdentifier != nil)
    }
}
