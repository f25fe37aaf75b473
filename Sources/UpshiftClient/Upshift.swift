import Foundation
@_exported import UpshiftWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The Upshift SDK: asks whether to prompt for an update, reports what the user did, and runs the app's
/// migration steps after an update. One per app process; everything it keeps lives in
/// `configuration.storageDirectory`.
public actor Upshift {
    public nonisolated let configuration: UpshiftConfiguration
    private let files: ClientFiles
    /// Whether the files could be read. While they cannot, the SDK runs in memory and writes nothing.
    private var storageReady = false
    /// The files as `init` read them, taken (and written back where needed) on the first use.
    private var unread: Files?
    /// How much the SDK knows of this install's past (from the files, at the first successful load).
    private enum History { case known, none, unreadable }
    private var history = History.none
    private var installIdentifier: UUID?
    private var state = ClientState()
    private var queue: [QueuedEvent] = []
    /// What the state file holds: a save that would write the same is skipped (fewer writes to flash).
    private var savedState: ClientState?
    /// A launch that waits for the files.
    private var pendingLaunch: (migrations: [MigrationStep], baseline: Baseline)?
    public private(set) var lastLaunch: LaunchReport?
    private var sender: Task<Void, Never>?
    private var sending = false
    /// Callers of `flush()` that came while another flush was sending: resumed when it ends, with
    /// whether a send of it failed.
    private var waitingToFlush: [CheckedContinuation<Bool, Never>] = []
    private var failures = 0
    private var nextAttempt: Date?
    private var current: UpshiftDecision?
    private var subscribers: [UUID: AsyncStream<UpshiftDecision>.Continuation] = [:]

    /// How often a step found interrupted at launch is started again before it is abandoned.
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
        return queue.count
    }
    /// Events dropped because the queue was full (oldest first), since the install.
    public var droppedEvents: Int {
        takeFiles()
        return state.evictedEvents
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

    // MARK: Files

    /// What the files held, ready to be used.
    private struct Files {
        var history: History
        var installId: UUID
        var state: ClientState
        var queue: StoredQueue
    }

    /// Reads the SDK's files; nil when any of them cannot be read now (nothing is used or written then,
    /// and the next call tries again). A state that makes no sense is moved aside (the history is then
    /// unknown, not a fresh install); the install id survives it in its own file.
    private static func read(_ files: ClientFiles, _ configuration: UpshiftConfiguration) -> Files? {
        let idFile = files.loadInstallId()
        let stateFile = files.loadState()
        let queueFile = files.loadQueue()
        for case .unavailable(let error)? in [idFile.failure, stateFile.failure, queueFile.failure] {
            configuration.log("the SDK's files cannot be read now, retried later: \(error)")
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
        var id: UUID
        switch idFile {
        case .loaded(let stored):
            id = stored
        case .corrupt(let error):
            configuration.log("install-id cannot be read (\(error)): moved aside, a new install id is made")
            try? files.moveAside(files.installIdURL, at: configuration.clock.now())
            id = UUIDv7.make(at: configuration.clock.now())
        case .missing, .unavailable:
            id = state.legacyInstallId ?? UUIDv7.make(at: configuration.clock.now())
        }
        if case .loaded = idFile {} else {
            do { try files.saveInstallId(id) } catch { configuration.log("cannot save the install id: \(error)") }
        }
        state.legacyInstallId = nil
        var queue = StoredQueue()
        if case .loaded(let stored) = queueFile {
            queue = stored
            if stored.unreadable > 0 { configuration.log("event queue: \(stored.unreadable) unreadable lines dropped") }
        }
        return Files(history: history, installId: id, state: state, queue: queue)
    }

    /// Takes what the files held. Events recorded while they could not be read come after those stored,
    /// and an opt-out made meanwhile holds.
    private func use(_ loaded: Files) {
        let recordedMeanwhile = queue
        let optedOut = loaded.state.optedOut || state.optedOut
        history = loaded.history
        installIdentifier = loaded.installId
        state = loaded.state
        state.optedOut = optedOut
        queue = optedOut ? [] : loaded.queue.events + recordedMeanwhile
        storageReady = true
        savedState = loaded.history == .known ? loaded.state : nil
        persistState()
        if !recordedMeanwhile.isEmpty || loaded.queue.unreadable > 0 || loaded.queue.fromLegacyFile || optedOut {
            persistQueue()
        }
    }

    private func takeFiles() {
        guard let loaded = unread else { return }
        unread = nil
        use(loaded)
    }

    /// Tries the files again while they could not be read; completes a launch that waited for them.
    private func ensureStorage() async {
        takeFiles()
        guard !storageReady, let loaded = Self.read(files, configuration) else { return }
        use(loaded)
        guard let launch = pendingLaunch else { return }
        pendingLaunch = nil
        lastLaunch = await performLaunch(launch.migrations, baseline: launch.baseline)
    }

    // MARK: Launch

    /// Call once per launch, early, in an app without migration steps: detects the first launch of a new
    /// version (records `updated` and asks for What's New on the next check) and starts sending events.
    /// Returns the version the app was updated from, if it was.
    @discardableResult
    public func launch() async -> String? {
        await launch(migrations: [], baseline: .freshInstall).updatedFrom
    }

    /// Call once per launch, early: detects an update, runs the migration steps due and starts sending.
    /// `baseline` says what an install without SDK state is; the first release that ships the SDK meets
    /// every existing user so (see docs/SDK.md, "Your first release with the SDK").
    @discardableResult
    public func launch(migrations: [MigrationStep], baseline: Baseline) async -> LaunchReport {
        startSending()
        await ensureStorage()
        guard storageReady else {
            pendingLaunch = (migrations, baseline)
            var report = LaunchReport()
            report.storageUnavailable = true
            lastLaunch = report
            return report
        }
        let report = await performLaunch(migrations, baseline: baseline)
        lastLaunch = report
        return report
    }

    private func performLaunch(_ migrations: [MigrationStep], baseline: Baseline) async -> LaunchReport {
        var report = LaunchReport()
        let current = configuration.appVersion
        if history == .known, let last = state.launchedVersion, last != current, Version(last) != Version(current) {
            report.updatedFrom = last
        }
        if state.migratedThrough == nil {
            // No SDK state, an unreadable one, or a data version that was unknown before: the baseline says.
            switch await Self.resolve(baseline) {
            case .freshInstall? where history == .none:
                state.migratedThrough = current
            case .existingData(let version)?:
                state.migratedThrough = version
                if history == .none, version != current, Version(version) != Version(current) {
                    report.updatedFrom = version
                }
            default:
                break
            }
        }
        if let from = report.updatedFrom {
            state.previousVersion = from
            state.whatsNew = nil
            record(.updated(fromVersion: from), id: UUIDv5.make("updated|\(installIdentifier?.uuidString ?? "")|\(from)|\(current)"))
        }
        state.launchedVersion = current
        state.launchedBuild = configuration.build
        history = .known
        persistState()
        await migrate(migrations, report: &report)
        return report
    }

    private static func resolve(_ baseline: Baseline) async -> Baseline? {
        var next: Baseline? = baseline
        for _ in 0..<4 {
            guard case .inspect(let inspect) = next else { return next }
            next = await inspect()
        }
        return nil
    }

    private func migrate(_ steps: [MigrationStep], report: inout LaunchReport) async {
        guard let current = Version(configuration.appVersion) else { return }
        guard let done = state.migratedThrough.flatMap(Version.init) else {
            report.dataVersionUnknown = true
            if !steps.isEmpty { configuration.log("the data's version is unknown: no migration step runs") }
            return
        }
        report.stepInterrupted = state.stepUnderWay?.version
        for step in steps.sorted(by: { $0.version < $1.version }) where step.version <= current && step.version > done {
            let name = step.version.text
            let attempts = state.stepUnderWay?.version == name ? state.stepUnderWay!.attempts : 0
            guard attempts < Self.stepAttempts else {
                report.stepAbandoned = name
                configuration.log("migration to \(name) was interrupted \(attempts) times: not started again")
                return
            }
            // The marker goes to disk before the step runs: a crash in it is seen at the next launch.
            state.stepUnderWay = ClientState.StepUnderWay(version: name, attempts: attempts + 1)
            persistState()
            do {
                try await step.run()
            } catch {
                state.stepUnderWay = nil
                persistState()
                report.stepFailed = name
                report.stepError = "\(error)"
                configuration.log("migration to \(name) failed, retried next launch: \(error)")
                return
            }
            state.migratedThrough = name
            state.stepUnderWay = nil
            persistState()
            report.stepsRun.append(name)
        }
    }

    // MARK: Consent

    /// The user opted out: nothing is recorded from now on, queued events are deleted, and checks are sent
    /// without the install id (the server records nothing for them). Kept across launches.
    public func optOut() {
        takeFiles()
        state.optedOut = true
        queue = []
        persistState()
        persistQueue()
    }

    /// Recording resumes.
    public func optIn() {
        takeFiles()
        state.optedOut = false
        persistState()
    }

    /// Deletes everything the SDK stored and starts over as a new install (a new install id), e.g. when
    /// the user asks to be forgotten. Events not yet sent are deleted with the rest.
    public func forget() {
        unread = nil
        do { try configuration.fileSystem.remove(configuration.storageDirectory) } catch {
            configuration.log("cannot delete the SDK's files: \(error)")
        }
        queue = []
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
    private var recording: Bool {
        !state.optedOut && configuration.sendsFromThisBuild
    }

    // MARK: Check

    /// Whether to show nothing, a soft prompt or a blocking screen. Asks the server when the last answer
    /// for this app version and build is older than its `checkAfterSeconds` (or with `force`, which also
    /// bypasses HTTP caches); answers within `checkTimeout` from that stored answer, or `none` without one.
    public func check(force: Bool = false) async -> UpshiftDecision {
        await ensureStorage()
        let decision = await decision(force: force)
        current = decision
        for subscriber in subscribers.values { subscriber.yield(decision) }
        return decision
    }

    private func decision(force: Bool) async -> UpshiftDecision {
        let now = configuration.clock.now()
        let stored = state.decision.flatMap {
            $0.appVersion == configuration.appVersion && $0.build == configuration.build ? $0 : nil
        }
        // A decision received "in the future" (the clock was set back) is stale.
        if !force, let stored, stored.receivedAt <= now,
            now < stored.receivedAt.addingTimeInterval(TimeInterval(stored.decision.checkAfterSeconds))
        {
            return decide(stored.decision, origin: .stored)
        }
        guard !configuration.isPreview else {
            return stored.map { decide($0.decision, origin: .stored) } ?? UpshiftDecision(action: .none, origin: .none)
        }
        let request = checkRequest(force: force)
        let transport = configuration.transport
        do {
            let (data, response) = try await withTimeout(configuration.checkTimeout) { try await transport.send(request) }
            guard response.statusCode == 200 else {
                throw CheckFailed(description: "HTTP \(response.statusCode): \(String(decoding: data.prefix(300), as: UTF8.self))")
            }
            let decision = try CatalogCoding.decoder().decode(CheckDecision.self, from: data)
            state.decision = ClientState.StoredDecision(
                appVersion: configuration.appVersion, build: configuration.build, decision: decision,
                receivedAt: configuration.clock.now())
            if state.previousVersion != nil, let whatsNew = decision.whatsNew {
                state.whatsNew = whatsNew
                state.previousVersion = nil
            }
            persistState()
            return decide(decision, origin: .server)
        } catch {
            configuration.log("check failed, answering from what is stored: \(error)")
            guard let stored else { return UpshiftDecision(action: .none, origin: .none) }
            return decide(stored.decision, origin: .stored)
        }
    }

    private func decide(_ decision: CheckDecision, origin: UpshiftDecision.Origin) -> UpshiftDecision {
        var result = UpshiftDecision(action: decision.action, origin: origin, server: decision)
        guard decision.action == .soft else { return result }  // a force ignores "later" and "skip"
        if let latest = decision.latestVersion.flatMap(Version.init), state.skippedVersions.contains(latest.normalized) {
            result.action = .none
            result.suppressedBy = .skipped
        } else if let remindAfter = state.remindAfter, configuration.clock.now() < remindAfter {
            result.action = .none
            result.suppressedBy = .remindLater
        }
        return result
    }

    private func checkRequest(force: Bool) -> URLRequest {
        let install = recording ? installIdentifier.map { $0.uuidString.lowercased() } : nil
        var query: [(String, String?)] = [
            ("platform", configuration.platform), ("version", configuration.appVersion),
            ("build", configuration.build.map(String.init)), ("os", configuration.osVersion),
            ("install", install), ("locale", configuration.locale),
            ("channel", configuration.channel.rawValue), ("previous", state.previousVersion),
        ]
        query.removeAll { $0.1 == nil }
        var components = URLComponents(
            url: configuration.baseURL.appendingPathComponent("v1/apps/\(configuration.appId)/check"),
            resolvingAgainstBaseURL: false)!
        // Every reserved character escaped (URLComponents would leave the `+` of `1.2+7` as it is).
        components.percentEncodedQuery = query.map { "\($0.0)=\(Self.escape($0.1!))" }.joined(separator: "&")
        var request = URLRequest(url: components.url!, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData)
        request.timeoutInterval = Self.seconds(configuration.checkTimeout)
        if force { request.setValue("no-cache", forHTTPHeaderField: "Cache-Control") }
        return request
    }

    /// The user chose "later" on a soft prompt: no soft prompt for `remindAfterSeconds`.
    public func remindLater(_ decision: UpshiftDecision) {
        takeFiles()
        guard let server = decision.server, server.action == .soft else { return }
        state.remindAfter = configuration.clock.now().addingTimeInterval(TimeInterval(server.remindAfterSeconds ?? 86_400))
        persistState()
        if let target = server.latestVersion { record(.promptDismissed(kind: .soft, targetVersion: target, action: .later)) }
    }

    /// The user chose to skip this version (when the decision allows it): no soft prompt for it again.
    public func skip(_ decision: UpshiftDecision) {
        takeFiles()
        guard let server = decision.server, server.action == .soft, server.allowSkip != false,
            let target = server.latestVersion, let version = Version(target)
        else { return }
        state.skippedVersions.insert(version.normalized)
        persistState()
        record(.promptDismissed(kind: .soft, targetVersion: target, action: .skip))
    }

    /// What's New was shown: it is not offered again, and `whats_new_shown` is recorded.
    public func whatsNewShown() {
        takeFiles()
        guard state.whatsNew != nil else { return }
        state.whatsNew = nil
        persistState()
        record(.whatsNewShown)
    }

    // MARK: Lifecycle

    /// Follows the app's lifecycle: on returning to the foreground a check (cached; forced while the
    /// current decision is a force, so that a lifted force clears at once), published on `decisions()`;
    /// on going to the background a flush, awaited inside `whileInBackground` (a background task on iOS).
    /// Ends when `events` ends. On Apple platforms `followSystemLifecycle()` passes the system's notifications.
    public func follow<Events: AsyncSequence & Sendable>(
        _ events: Events,
        whileInBackground: @escaping @Sendable (_ work: @Sendable () async -> Void) async -> Void = { await $0() }
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

    // MARK: Events

    /// Queues an event on disk at once; it is sent within `flushInterval`, on `flush()`, or when the app
    /// goes to the background. Nothing is recorded after `optOut()`, in previews, or in debug builds the
    /// app did not allow.
    public func record(_ event: UpshiftEvent) {
        takeFiles()
        record(event, id: UUIDv7.make(at: configuration.clock.now()))
    }

    private func record(_ event: UpshiftEvent, id uuid: UUID) {
        guard recording else { return }
        let id = uuid.uuidString.lowercased()
        guard !queue.contains(where: { $0.id == id }) else { return }
        var body: [String: JSONValue] = [
            "id": .string(id), "type": .string(event.type.rawValue),
            "occurredAt": .string(Timestamp.format(configuration.clock.now())),
            "appId": .string(configuration.appId),
            "platform": .string(configuration.platform), "appVersion": .string(configuration.appVersion),
        ]
        if let build = configuration.build { body["build"] = .number(JSONNumber(build)) }
        if let os = configuration.osVersion { body["osVersion"] = .string(os) }
        if let locale = configuration.locale { body["locale"] = .string(locale) }
        for (key, value) in event.fields { body[key] = .string(value) }
        let queued = QueuedEvent(id: id, body: body)
        queue.append(queued)
        let excess = queue.count - configuration.queueCapacity
        if excess > 0 {
            queue.removeFirst(excess)
            state.evictedEvents += excess
            configuration.log("event queue full: dropped the \(excess) oldest")
            persistState()
            persistQueue()
        } else if storageReady {
            do { try files.appendToQueue([queued]) } catch { configuration.log("cannot save the event queue: \(error)") }
        }
    }

    /// Sends every queued event now, in batches, until the queue is empty or a batch fails (then it is
    /// retried later with backoff, with the same ids, so the server stores each event once). A flush
    /// already under way (the periodic one) is waited for first, then what is left is sent, unless that
    /// flush failed (the backoff holds): on return, every event queued before the call has been sent, or a
    /// send failed. Nothing is sent while the SDK's files cannot be read (the install id is unknown).
    public func flush() async {
        await ensureStorage()
        guard storageReady, recording else { return }
        while sending {
            let failed = await withCheckedContinuation { waitingToFlush.append($0) }
            if failed { return }
        }
        sending = true
        var failed = false
        defer {
            sending = false
            let waiting = waitingToFlush
            waitingToFlush = []
            for caller in waiting { caller.resume(returning: failed) }
        }
        var batchSize = configuration.batchSize
        while !queue.isEmpty {
            let batch = Array(queue.prefix(batchSize))
            do {
                try await send(batch)
                failures = 0
                nextAttempt = nil
            } catch is TooLarge {
                batchSize = max(1, batch.count / 2)  // the server's byte limit: halves until it fits
            } catch let error as RetryLater {
                failures += 1
                let delay = configuration.retry.delay(
                    after: failures, retryAfter: error.retryAfter, random: Double.random(in: 0...1))
                nextAttempt = configuration.clock.now().addingTimeInterval(Self.seconds(delay))
                configuration.log("sending \(batch.count) events failed (\(error.reason)); retrying in \(delay)")
                failed = true
                return
            } catch {
                return  // cancelled
            }
        }
    }

    /// Sends when the app goes to the background (what `follow(_:)` does on `.background`).
    public func enteredBackground() async { await flush() }

    /// Stops the periodic sending (events stay queued on disk).
    public func stop() {
        sender?.cancel()
        sender = nil
    }

    private func startSending() {
        guard sender == nil else { return }
        let interval = configuration.flushInterval
        sender = Task { [weak self] in
            while true {
                do { try await Task.sleep(for: interval) } catch { return }  // stopped: no last send
                guard let self else { return }
                await self.flushIfDue()
            }
        }
    }

    private func flushIfDue() async {
        if let nextAttempt, configuration.clock.now() < nextAttempt { return }
        await flush()
    }

    struct RetryLater: Error {
        var reason: String
        var retryAfter: Duration?
    }

    /// A `413` for a batch of more than one event: sent again in smaller batches.
    struct TooLarge: Error {}

    /// Posts one batch and takes its events off the queue when the server answered for them.
    private func send(_ batch: [QueuedEvent]) async throws {
        guard let installId = installIdentifier?.uuidString.lowercased() else { throw RetryLater(reason: "no install id") }
        let events = batch.map { event in
            var body = event.body
            body["installId"] = .string(installId)
            return JSONValue.object(body)
        }
        var request = URLRequest(url: configuration.baseURL.appendingPathComponent("v1/events"))
        request.httpMethod = "POST"
        // gzip: a batch's events repeat the same names and values, so it shrinks to a fraction.
        request.httpBody = Data(Gzip.compress(Array(try JSONEncoder().encode(["events": events]))))
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        request.setValue("Bearer \(configuration.ingestKey)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        let data: Data
        let response: HTTPURLResponse
        do {
            (data, response) = try await configuration.transport.send(request)
        } catch {
            if Task.isCancelled { throw error }
            throw RetryLater(reason: "\(error)")
        }
        let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap(Int.init).map { Duration.seconds($0) }
        switch response.statusCode {
        case 200:
            if let reply = try? JSONDecoder().decode(IngestResponse.self, from: data) {
                for result in reply.results where result.status == .rejected {
                    configuration.log(
                        "the server rejected event \(result.id ?? "?"), dropped: \(result.error ?? "") \(result.message ?? "")")
                }
            }
        case 413 where batch.count > 1:
            throw TooLarge()
        case 429, 500...599:
            throw RetryLater(reason: "HTTP \(response.statusCode)", retryAfter: retryAfter)
        case 401, 403:
            // A wrong or revoked key: keep the events until the app ships a good one.
            throw RetryLater(reason: "HTTP \(response.statusCode): the ingest key was refused", retryAfter: retryAfter)
        default:
            configuration.log(
                "the server refused a batch of \(batch.count) events, dropped: HTTP \(response.statusCode) "
                    + String(decoding: data.prefix(300), as: UTF8.self))
        }
        let sent = Set(batch.map(\.id))
        queue.removeAll { sent.contains($0.id) }
        persistQueue()
    }

    // MARK: Helpers

    private func persistState() {
        guard storageReady, state != savedState else { return }
        do {
            try files.saveState(state)
            savedState = state
        } catch { configuration.log("cannot save state: \(error)") }
    }

    /// Rewrites the queue file with what is queued (after a send or an eviction; a new event is appended).
    private func persistQueue() {
        guard storageReady else { return }
        do { try files.rewriteQueue(queue) } catch { configuration.log("cannot save the event queue: \(error)") }
    }

    static func escape(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }

    static func seconds(_ duration: Duration) -> TimeInterval {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }
}

/// What the app's lifecycle tells the SDK (`Upshift.follow(_:)`).
public enum AppLifecycleEvent: Sendable, Equatable {
    case foreground, background
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
