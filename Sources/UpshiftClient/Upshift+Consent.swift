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
    /// files go: the storage directory and whatever else the app keeps in it stay.
    public func forget() {
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
    }

    /// Whether events and install ids go to the server: not after `optOut()`, never from a SwiftUI
    /// preview, and from a debug build only when the app allows it (`sendFromDebugBuilds`).
    var recording: Bool {
        !state.optedOut && configuration.sendsFromThisBuild
    }
}
