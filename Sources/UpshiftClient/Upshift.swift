import Foundation
@_exported import UpshiftWire

/// The Upshift SDK: asks whether to prompt for an update, reports what the user did, and runs the app's
/// migration steps after an update. One per app process; everything it keeps lives in
/// `configuration.storageDirectory`.
///
/// The actor's features live in `Upshift+Feature.swift` files: the files it keeps (`+Files`), `launch`
/// (`+Launch`), consent (`+Consent`), the check and what the user answered (`+Check`), events (`+Events`)
/// and the app's lifecycle (`+Lifecycle`).
public actor Upshift {
    public nonisolated let configuration: UpshiftConfiguration
    let files: ClientFiles
    /// Whether the files could be read. While they cannot, the SDK runs in memory and writes nothing.
    var storageReady = false
    /// The files as `init` read them, taken (and written back where needed) on the first use.
    var unread: Files?
    /// How much the SDK knows of this install's past (from the files, at the first successful load).
    enum History { case known, none, unreadable }
    var history = History.none
    var installIdentifier: UUID?
    var state = ClientState()
    var queue = EventQueue()
    /// What the state file holds: a save that would write the same is skipped (fewer writes to flash).
    var savedState: ClientState?
    /// A launch that waits for the files.
    var pendingLaunch: (migrations: [MigrationStep], baseline: Baseline)?
    public internal(set) var lastLaunch: LaunchReport?
    /// One more with each launch and each return to the foreground: the presenter records `blocked` once
    /// per foreground session.
    public internal(set) var foregroundSession = 0
    var sender: Task<Void, Never>?
    var sending = false
    /// Callers of `flush()` that came while another flush was sending: resumed when it ends, with
    /// whether a send of it failed.
    var waitingToFlush: [CheckedContinuation<Bool, Never>] = []
    var failures = 0
    /// Event members the server said it ignored, each logged once (debug builds only).
    var loggedIgnored: Set<String> = []
    var nextAttempt: Date?
    var current: UpshiftDecision?
    var subscribers: [UUID: AsyncStream<UpshiftDecision>.Continuation] = [:]

    /// How often one app version and build starts a step found interrupted at launch before it gives up
    /// on it (a new version or build tries again).
    public static let stepAttempts = 3

    public init(configuration: UpshiftConfiguration) {
        self.configuration = configuration
        files = ClientFiles(directory: configuration.storageDirectory, fileSystem: configuration.fileSystem)
        if configuration.build == nil, let text = configuration.bundleBuild {
            configuration.log("CFBundleVersion \(text) is not an integer: build is left out")
        }
        unread = Self.read(files, configuration)
    }

    /// The install's id: random, made once, kept in its own file (out of backups). Nil while the SDK's
    /// files cannot be read.
    public var installId: UUID? {
        takeFiles()
        return installIdentifier
    }
    /// Events waiting to be sent.
    public var pendingEvents: Int {
        takeFiles()
        return queue.events.count
    }
    /// Events dropped because the queue was full (oldest first), since the install.
    public var droppedEvents: Int {
        takeFiles()
        return queue.evicted
    }
    /// What's New after an update (from the first check that sent `previous`), until `whatsNewShown()`.
    public var whatsNew: [VersionNotes]? {
        takeFiles()
        return state.whatsNew
    }
    /// False while the SDK's files cannot be read (a device locked since its restart): nothing is stored
    /// or sent for the install then, and every call tries the files again.
    public var isStorageAvailable: Bool {
        takeFiles()
        return storageReady
    }
    /// True after `optOut()`.
    public var isOptedOut: Bool {
        takeFiles()
        return state.optedOut
    }
    /// The last decision `check()` gave.
    public var currentDecision: UpshiftDecision? { current }

    /// Every decision `check()` gives from now on (the app's own calls and those on returning to the
    /// foreground, see `follow(_:)`).
    public func decisions() -> AsyncStream<UpshiftDecision> {
        let (stream, continuation) = AsyncStream.makeStream(of: UpshiftDecision.self, bufferingPolicy: .bufferingNewest(1))
        let key = UUID()
        subscribers[key] = continuation
        continuation.onTermination = { [weak self] _ in
            Task { await self?.unsubscribe(key) }
        }
        return stream
    }

    private func unsubscribe(_ key: UUID) {
        subscribers[key] = nil
    }

    // MARK: Writes

    func persistState() {
        guard storageReady, state != savedState else { return }
        do {
            try files.saveState(state)
            savedState = state
        } catch { configuration.log("cannot save state: \(error)") }
    }

    /// Brings the queue file up to date after a change of the queue (`EventQueue` says how).
    func persistQueue(_ write: EventQueue.Write) {
        guard storageReady else { return }
        do {
            switch write {
            case .none:
                return
            case .append(let lines):
                try files.appendToQueue(lines)
            case .rewrite:
                try files.rewriteQueue(queue)
                queue.compacted()
            }
        } catch {
            queue.writeFailed()
            configuration.log("cannot save the event queue: \(error)")
        }
    }

    // MARK: Helpers

    static func escape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}
