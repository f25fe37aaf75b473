import Foundation

/// The SDK's files: read once they can be, taken into memory, tried again while they cannot.
extension Upshift {
    /// What the files held, ready to be used.
    struct Files {
        var history: History
        /// Nil only in an app extension that the app shares no install id with.
        var installId: UUID?
        var state: ClientState
        /// The state file holds fields of earlier SDK versions, moved out of it: it is saved again.
        var stateHasLegacyFields: Bool
        var queue: EventQueue
    }

    /// Reads the SDK's files; nil when any of them cannot be read now (nothing is used or written then,
    /// and the next call tries again; `logUnavailable` says so once, not at every try). A state that makes
    /// no sense is moved aside (the history is then unknown, not a fresh install); the install id survives
    /// it in its own file.
    static func read(_ files: ClientFiles, _ configuration: UpshiftConfiguration, logUnavailable: Bool = true) -> Files? {
        // An app extension has a container of its own and makes no install id there (it would count the
        // device twice): it takes the one the app shares, if any.
        let idFile: Loaded<UUID> = configuration.isAppExtension ? .missing : files.loadInstallId()
        let stateFile = files.loadState()
        let queueFile = files.loadQueue()
        for case .unavailable(let error)? in [idFile.failure, stateFile.failure, queueFile.failure] {
            if logUnavailable { configuration.log("the SDK's files cannot be read now, retried later: \(error)") }
            return nil
        }
        var state = ClientState()
        var history = History.none
        switch stateFile {
        case .loaded(let stored):
            state = stored
            history = .known
        case .corrupt(let error):
            configuration.log("state.json cannot be read (\(error)): moved aside; this install's history is unknown")
            try? files.moveAside(files.stateURL, at: configuration.clock.now())
            history = .unreadable
        case .missing, .unavailable:
            break
        }
        var id: UUID?
        if configuration.isAppExtension {
            id = configuration.sharedInstallIdDirectory.flatMap { directory in
                guard case .loaded(let shared) = ClientFiles.loadInstallId(ClientFiles.sharedInstallIdURL(directory), files.fileSystem)
                else { return nil }
                return shared
            }
        } else {
            let made: UUID
            switch idFile {
            case .loaded(let stored):
                made = stored
            case .corrupt(let error):
                configuration.log("install-id cannot be read (\(error)): moved aside, a new install id is made")
                try? files.moveAside(files.installIdURL, at: configuration.clock.now())
                made = UUIDv7.make(at: configuration.clock.now())
            case .missing, .unavailable:
                made = state.legacyInstallId ?? UUIDv7.make(at: configuration.clock.now())
            }
            if case .loaded = idFile {} else {
                do { try files.saveInstallId(made) } catch { configuration.log("cannot save the install id: \(error)") }
            }
            if let directory = configuration.sharedInstallIdDirectory { share(made, in: directory, files, configuration) }
            id = made
        }
        let stateHasLegacyFields = state.legacyInstallId != nil || state.legacyEvictedEvents > 0
        state.legacyInstallId = nil
        var queue = EventQueue()
        if case .loaded(let stored) = queueFile {
            queue = stored
            if stored.unreadableLines > 0 {
                configuration.log("event queue: \(stored.unreadableLines) unreadable lines dropped")
            }
        }
        queue.countEvicted(state.legacyEvictedEvents)
        state.legacyEvictedEvents = 0
        return Files(
            history: history, installId: id, state: state, stateHasLegacyFields: stateHasLegacyFields, queue: queue)
    }

    /// Writes the app's install id where its extensions read it, when it is not there already.
    static func share(_ id: UUID, in directory: URL, _ files: ClientFiles, _ configuration: UpshiftConfiguration) {
        let url = ClientFiles.sharedInstallIdURL(directory)
        if case .loaded(let shared) = ClientFiles.loadInstallId(url, files.fileSystem), shared == id { return }
        do {
            try files.fileSystem.write(Data(id.uuidString.lowercased().utf8), to: url)
            files.fileSystem.excludeFromBackup(url)
        } catch {
            configuration.log("cannot share the install id with the app's extensions: \(error)")
        }
    }

    /// Takes what the files held. Events recorded while they could not be read come after those stored,
    /// and an opt-out made meanwhile holds.
    /// A session the files hold open was a process's before this one (this one writes nothing before it
    /// has read them): it ended without the app saying so, and `abnormal_exit` is queued before the state
    /// that closes it is saved.
    func use(_ loaded: Files) {
        let optedOut = loaded.state.optedOut || state.optedOut
        var stored = loaded.queue
        stored.adopt(queue, capacity: configuration.queueCapacity)
        let abandoned = loaded.state.session
        let session = state.session  // opened by this process while the files could not be read
        history = loaded.history
        installIdentifier = loaded.installId
        state = loaded.state
        state.optedOut = optedOut
        state.session = session
        queue = stored
        storageReady = true
        savedState = loaded.history == .known && !loaded.stateHasLegacyFields ? loaded.state : nil
        if optedOut {
            persistQueue(queue.removeAll())
        } else if queue.fileIsStale {
            persistQueue(.rewrite)
        }
        if let abandoned { recordAbnormalExit(of: abandoned) }
        persistState()
    }

    /// Uses the files: those `init` read, or, while they could not be read, the files read again now.
    func takeFiles() {
        if let loaded = unread {
            unread = nil
            use(loaded)
        } else if !storageReady, let loaded = Self.read(files, configuration, logUnavailable: false) {
            use(loaded)
        }
    }

    /// `takeFiles()`, and completes a launch that waited for the files.
    func ensureStorage() async {
        takeFiles()
        guard storageReady, let launch = pendingLaunch else { return }
        pendingLaunch = nil
        lastLaunch = await performLaunch(launch.migrations, baseline: launch.baseline)
    }
}

extension Loaded {
    /// The failure, if the file could not be used as it is.
    var failure: Loaded<Void>? {
        switch self {
        case .loaded, .missing: nil
        case .unavailable(let error): .unavailable(error)
        case .corrupt(let error): .corrupt(error)
        }
    }
}
