import Foundation
import UpshiftCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(UIKit)
    import UIKit
#endif

/// What happened in the app that Upshift counts (DESIGN.md section 5). `checked` is the server's own.
public enum UpshiftEvent: Sendable, Equatable {
    case launched
    case promptShown(kind: PromptKind, targetVersion: String)
    case promptDismissed(kind: PromptKind, targetVersion: String, action: DismissAction)
    case updateStarted(kind: PromptKind, targetVersion: String)
    case updated(fromVersion: String)
    case blocked(targetVersion: String)
    case whatsNewShown

    var type: EventType {
        switch self {
        case .launched: .launched
        case .promptShown: .promptShown
        case .promptDismissed: .promptDismissed
        case .updateStarted: .updateStarted
        case .updated: .updated
        case .blocked: .blocked
        case .whatsNewShown: .whatsNewShown
        }
    }

    var fields: [String: String] {
        switch self {
        case .launched, .whatsNewShown: [:]
        case .promptShown(let kind, let target), .updateStarted(let kind, let target):
            ["promptKind": kind.rawValue, "targetVersion": target]
        case .promptDismissed(let kind, let target, let action):
            ["promptKind": kind.rawValue, "targetVersion": target, "dismissAction": action.rawValue]
        case .updated(let from): ["fromVersion": from]
        case .blocked(let target): ["targetVersion": target]
        }
    }
}

/// What the app should show now: the server's decision with the device's own rules applied.
public struct UpshiftDecision: Sendable, Equatable {
    public enum Origin: Sendable, Equatable {
        /// Asked the server just now.
        case server
        /// The decision stored for this app version and build: not due yet, or the server did not answer in time.
        case stored
        /// No answer and nothing stored for this version: show nothing.
        case none
    }

    public enum Suppression: Sendable, Equatable {
        /// The user chose "later" less than `remindAfterSeconds` ago.
        case remindLater
        /// The user chose to skip this version.
        case skipped
    }

    /// `none`, `soft` or `force`, after the reminder and skip rules (which never hold back a force).
    public var action: CheckAction
    public var origin: Origin
    public var suppressedBy: Suppression?
    /// The server's answer this is based on; nil with origin `none`.
    public var server: CheckDecision?

    public var latestVersion: String? { server?.latestVersion }
    public var updateURL: String? { server?.updateURL }
    public var releaseNotes: [VersionNotes] { server?.releaseNotes ?? [] }
}

/// A step that brings the app's data to `version`: run once, in version order, on the first launch at or
/// after it, even when versions in between were skipped.
public struct MigrationStep: Sendable {
    public var version: Version
    public var run: @Sendable () async throws -> Void

    /// Nil when `version` is not a version.
    public init?(version: String, _ run: @escaping @Sendable () async throws -> Void) {
        guard let parsed = Version(version) else { return nil }
        self.version = parsed
        self.run = run
    }
}

/// The Upshift SDK: asks whether to prompt for an update, reports what the user did, and runs the app's
/// migration steps after an update. One per app process; everything it keeps lives in
/// `configuration.storageDirectory`.
public actor Upshift {
    public let configuration: UpshiftConfiguration
    private let files: FileStore
    private var state: ClientState
    private var queue: [QueuedEvent]
    /// What the files hold: a save that would write the same is skipped (fewer writes to the device's flash).
    private var savedState: ClientState?
    private var savedQueue: [QueuedEvent]?
    private var sender: Task<Void, Never>?
    private var sending = false
    /// Callers of `flush()` that came while another flush was sending: resumed when it ends, with
    /// whether a send of it failed.
    private var waitingToFlush: [CheckedContinuation<Bool, Never>] = []
    private var failures = 0
    private var nextAttempt: Date?

    public init(configuration: UpshiftConfiguration) {
        self.configuration = configuration
        files = FileStore(directory: configuration.storageDirectory)
        let storedQueue = files.load([QueuedEvent].self, from: "queue.json")
        queue = storedQueue ?? []
        savedQueue = storedQueue
        if let stored = files.load(ClientState.self, from: "state.json") {
            state = stored
            savedState = stored
        } else {
            state = ClientState()  // a new install id, kept from now on
            do {
                try files.save(state, to: "state.json")
                savedState = state
            } catch { configuration.log("cannot save state: \(error)") }
        }
    }

    /// The install's id: random, made once, kept in the storage directory.
    public var installId: UUID { state.installId }
    /// Events waiting to be sent.
    public var pendingEvents: Int { queue.count }
    /// Events dropped because the queue was full (oldest first), since the install.
    public var droppedEvents: Int { state.evictedEvents }
    /// What's New after an update (from the first check that sent `previous`), until `whatsNewShown()`.
    public var whatsNew: [VersionNotes]? { state.whatsNew }

    // MARK: Launch

    /// Call once per launch, early. Detects the first launch of a new version (records `updated` and
    /// asks for What's New on the next check), runs the migration steps due, and starts sending events.
    /// Returns the version the app was updated from, if it was.
    @discardableResult
    public func launch(migrations: [MigrationStep] = []) async -> String? {
        let current = configuration.appVersion
        var updatedFrom: String?
        if let last = state.launchedVersion {
            if last != current, Version(last) != Version(current) {
                updatedFrom = last
                state.previousVersion = last
                state.whatsNew = nil
                record(.updated(fromVersion: last))
            }
        } else {
            // A fresh install has no data of earlier versions to migrate.
            state.migratedThrough = current
        }
        state.launchedVersion = current
        state.launchedBuild = configuration.build
        persistState()
        await migrate(migrations)
        startSending()
        return updatedFrom
    }

    private func migrate(_ steps: [MigrationStep]) async {
        guard let current = Version(configuration.appVersion) else { return }
        let done = state.migratedThrough.flatMap(Version.init)
        for step in steps.sorted(by: { $0.version < $1.version })
        where step.version <= current && done.map({ step.version > $0 }) ?? true {
            do {
                try await step.run()
            } catch {
                configuration.log("migration to \(step.version.normalized) failed, retried next launch: \(error)")
                return
            }
            state.migratedThrough = step.version.normalized
            persistState()
        }
    }

    // MARK: Check

    /// Whether to show nothing, a soft prompt or a blocking screen. Asks the server when the last answer
    /// for this app version and build is older than its `checkAfterSeconds` (or with `force`, which also
    /// bypasses HTTP caches); answers within `checkTimeout` from that stored answer, or `none` without one.
    public func check(force: Bool = false) async -> UpshiftDecision {
        let stored = state.decision.flatMap {
            $0.appVersion == configuration.appVersion && $0.build == configuration.build ? $0 : nil
        }
        if !force, let stored,
            configuration.clock.now() < stored.receivedAt.addingTimeInterval(TimeInterval(stored.decision.checkAfterSeconds))
        {
            return decide(stored.decision, origin: .stored)
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
        var query: [(String, String?)] = [
            ("platform", configuration.platform), ("version", configuration.appVersion),
            ("build", configuration.build.map(String.init)), ("os", configuration.osVersion),
            ("install", state.installId.uuidString.lowercased()), ("locale", configuration.locale),
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
        guard let server = decision.server, server.action == .soft else { return }
        state.remindAfter = configuration.clock.now().addingTimeInterval(TimeInterval(server.remindAfterSeconds ?? 86_400))
        persistState()
        if let target = server.latestVersion { record(.promptDismissed(kind: .soft, targetVersion: target, action: .later)) }
    }

    /// The user chose to skip this version (when the decision allows it): no soft prompt for it again.
    public func skip(_ decision: UpshiftDecision) {
        guard let server = decision.server, server.action == .soft, server.allowSkip != false,
            let target = server.latestVersion, let version = Version(target)
        else { return }
        state.skippedVersions.insert(version.normalized)
        persistState()
        record(.promptDismissed(kind: .soft, targetVersion: target, action: .skip))
    }

    /// What's New was shown: it is not offered again, and `whats_new_shown` is recorded.
    public func whatsNewShown() {
        guard state.whatsNew != nil else { return }
        state.whatsNew = nil
        persistState()
        record(.whatsNewShown)
    }

    // MARK: Events

    /// Queues an event on disk at once; it is sent within `flushInterval`, on `flush()`, or when the app
    /// goes to the background.
    public func record(_ event: UpshiftEvent) {
        let id = UUIDv7.make(at: configuration.clock.now()).uuidString.lowercased()
        var body: [String: JSONValue] = [
            "id": .string(id), "type": .string(event.type.rawValue),
            "occurredAt": .string(Timestamp.format(configuration.clock.now())),
            "installId": .string(state.installId.uuidString.lowercased()), "appId": .string(configuration.appId),
            "platform": .string(configuration.platform), "appVersion": .string(configuration.appVersion),
        ]
        if let build = configuration.build { body["build"] = .number(JSONNumber(build)) }
        if let os = configuration.osVersion { body["osVersion"] = .string(os) }
        if let locale = configuration.locale { body["locale"] = .string(locale) }
        for (key, value) in event.fields { body[key] = .string(value) }
        queue.append(QueuedEvent(id: id, body: body))
        let excess = queue.count - configuration.queueCapacity
        if excess > 0 {
            queue.removeFirst(excess)
            state.evictedEvents += excess
            configuration.log("event queue full: dropped the \(excess) oldest")
            persistState()
        }
        persistQueue()
    }

    /// Sends every queued event now, in batches, until the queue is empty or a batch fails (then it is
    /// retried later with backoff, with the same ids, so the server stores each event once). A flush
    /// already under way (the periodic one) is waited for first, then what is left is sent, unless that
    /// flush failed (the backoff holds): on return, every event queued before the call has been sent, or a
    /// send failed.
    public func flush() async {
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
        while !queue.isEmpty {
            let batch = Array(queue.prefix(configuration.batchSize))
            do {
                try await send(batch)
                failures = 0
                nextAttempt = nil
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

    /// Sends when the app goes to the background (call it from your scene delegate on platforms without UIKit).
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
        #if canImport(UIKit)
            NotificationCenter.default.addObserver(
                forName: UIApplication.didEnterBackgroundNotification, object: nil, queue: nil
            ) { [weak self] _ in
                guard let self else { return }
                Task { await self.flush() }
            }
        #endif
    }

    private func flushIfDue() async {
        if let nextAttempt, configuration.clock.now() < nextAttempt { return }
        await flush()
    }

    struct RetryLater: Error {
        var reason: String
        var retryAfter: Duration?
    }

    /// Posts one batch and takes its events off the queue when the server answered for them.
    private func send(_ batch: [QueuedEvent]) async throws {
        let body = try JSONEncoder().encode(["events": batch.map { JSONValue.object($0.body) }])
        var request = URLRequest(url: configuration.baseURL.appendingPathComponent("v1/events"))
        request.httpMethod = "POST"
        request.httpBody = body
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
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
        guard state != savedState else { return }
        do {
            try files.save(state, to: "state.json")
            savedState = state
        } catch { configuration.log("cannot save state: \(error)") }
    }

    private func persistQueue() {
        guard queue != savedQueue else { return }
        do {
            try files.save(queue, to: "queue.json")
            savedQueue = queue
        } catch { configuration.log("cannot save the event queue: \(error)") }
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

struct CheckFailed: Error, CustomStringConvertible {
    let description: String
}

struct CheckTimedOut: Error, CustomStringConvertible {
    var description: String { "no answer in time" }
}

/// Runs `operation` and waits for it at most `limit`: the answer, its error, or `CheckTimedOut`. An
/// operation that outlasts the limit is cancelled and not waited for.
func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let settled = SettleOnce()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let work = Task {
            do {
                let value = try await operation()
                if settled.claim() { continuation.resume(returning: value) }
            } catch {
                if settled.claim() { continuation.resume(throwing: error) }
            }
        }
        Task {
            try? await Task.sleep(for: limit)
            if settled.claim() {
                work.cancel()
                continuation.resume(throwing: CheckTimedOut())
            }
        }
    }
}

/// True for the first caller only.
final class SettleOnce: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false

    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if done { return false }
        done = true
        return true
    }
}
