import Foundation
import UpshiftWire

/// What the SDK remembers across launches, in `state.json` of the storage directory. Every field decodes
/// with a default, so a file written by an older or newer SDK loads (`schemaVersion` says which wrote it).
struct ClientState: Codable, Sendable, Equatable {
    /// 3: the crash-loop marker names the app version and build; dropped events are counted in the queue file.
    static let schemaVersion = 3

    struct StoredDecision: Codable, Sendable, Equatable {
        /// The app version and build the decision was made for: it is never used for another.
        var appVersion: String
        var build: Int?
        var decision: CheckDecision
        var receivedAt: Date
    }

    /// A migration step started and not yet finished: found at launch, it was interrupted (a crash, a kill).
    /// Its attempts count for the app version and build that made them: a new one tries the step again.
    struct StepUnderWay: Codable, Sendable, Equatable {
        var version: String
        var attempts: Int
        var appVersion: String?
        var build: Int?
    }

    var schemaVersion = ClientState.schemaVersion
    /// The version (and build) of the last launch: a different one is an update.
    var launchedVersion: String?
    var launchedBuild: Int?
    /// The version before the last update, sent as `previous` until a check answered with What's New.
    var previousVersion: String?
    var whatsNew: [VersionNotes]?
    var decision: StoredDecision?
    /// No soft prompt before this time (the user chose "later").
    var remindAfter: Date?
    /// Versions the user chose to skip (normalized spelling).
    var skippedVersions: Set<String> = []
    /// The version of the last migration step that completed; nil while the data's version is unknown.
    var migratedThrough: String?
    var stepUnderWay: StepUnderWay?
    /// Events dropped from a full queue as SDK versions that counted them here did (moved to the queue file).
    var legacyEvictedEvents = 0
    /// The user opted out: nothing is recorded, checks carry no install id.
    var optedOut = false
    /// The install id of SDK versions that kept it here (moved to its own file on first load).
    var legacyInstallId: UUID?

    init() {}

    enum CodingKeys: String, CodingKey {
        case schemaVersion, launchedVersion, launchedBuild, previousVersion, whatsNew, decision, remindAfter
        case skippedVersions, migratedThrough, stepUnderWay, optedOut
        case legacyInstallId = "installId"
        case legacyEvictedEvents = "evictedEvents"
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        schemaVersion = try container.decodeIfPresent(Int.self, forKey: .schemaVersion) ?? 1
        launchedVersion = try container.decodeIfPresent(String.self, forKey: .launchedVersion)
        launchedBuild = try container.decodeIfPresent(Int.self, forKey: .launchedBuild)
        previousVersion = try container.decodeIfPresent(String.self, forKey: .previousVersion)
        whatsNew = try container.decodeIfPresent([VersionNotes].self, forKey: .whatsNew)
        // A decision this SDK cannot read is only a stale answer: asked again.
        decision = try? container.decodeIfPresent(StoredDecision.self, forKey: .decision)
        remindAfter = try container.decodeIfPresent(Date.self, forKey: .remindAfter)
        skippedVersions = try container.decodeIfPresent(Set<String>.self, forKey: .skippedVersions) ?? []
        migratedThrough = try container.decodeIfPresent(String.self, forKey: .migratedThrough)
        stepUnderWay = try container.decodeIfPresent(StepUnderWay.self, forKey: .stepUnderWay)
        legacyEvictedEvents = try container.decodeIfPresent(Int.self, forKey: .legacyEvictedEvents) ?? 0
        optedOut = try container.decodeIfPresent(Bool.self, forKey: .optedOut) ?? false
        legacyInstallId = try container.decodeIfPresent(UUID.self, forKey: .legacyInstallId)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ClientState.schemaVersion, forKey: .schemaVersion)
        try container.encodeIfPresent(launchedVersion, forKey: .launchedVersion)
        try container.encodeIfPresent(launchedBuild, forKey: .launchedBuild)
        try container.encodeIfPresent(previousVersion, forKey: .previousVersion)
        try container.encodeIfPresent(whatsNew, forKey: .whatsNew)
        try container.encodeIfPresent(decision, forKey: .decision)
        try container.encodeIfPresent(remindAfter, forKey: .remindAfter)
        try container.encode(skippedVersions.sorted(), forKey: .skippedVersions)
        try container.encodeIfPresent(migratedThrough, forKey: .migratedThrough)
        try container.encodeIfPresent(stepUnderWay, forKey: .stepUnderWay)
        try container.encode(optedOut, forKey: .optedOut)
    }
}

/// Where the SDK's files live. The default is the device's file system; tests pass one that fails the
/// way a locked device or a full disk does.
public protocol UpshiftFileSystem: Sendable {
    /// The file's bytes, or nil when there is no such file. Throws when it exists and cannot be read.
    func read(_ url: URL) throws -> Data?
    /// Replaces the file atomically (a crash leaves the old or the new file, never half of one).
    func write(_ data: Data, to url: URL) throws
    /// Adds `data` at the end of the file, creating it when missing.
    func append(_ data: Data, to url: URL) throws
    /// Renames a file; the destination is replaced.
    func move(_ url: URL, to destination: URL) throws
    /// Removes a file or a directory with everything in it; nothing when it does not exist.
    func remove(_ url: URL) throws
    /// What the directory holds; nothing when it does not exist. The default lists the device's directory.
    func contents(of directory: URL) throws -> [URL]
}

extension UpshiftFileSystem {
    public func contents(of directory: URL) throws -> [URL] {
        try DeviceFileSystem().contents(of: directory)
    }
}

/// The device's file system; on Apple platforms files are readable from the first unlock after a restart on.
/// Only "no such file" (`ENOENT`) makes a file missing: any other failure (no permission, a path through
/// a file, a directory where the file should be) is thrown, so that the SDK never takes a file it cannot
/// read for one that was never written.
public struct DeviceFileSystem: UpshiftFileSystem {
    public init() {}

    public func read(_ url: URL) throws -> Data? {
        do { return try Data(contentsOf: url) } catch where Self.isNoSuchFile(error) { return nil }
    }

    public func write(_ data: Data, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: Data.WritingOptions.atomic.union(ApplePlatform.fileProtection))
    }

    public func append(_ data: Data, to url: URL) throws {
        let handle: FileHandle
        do { handle = try FileHandle(forWritingTo: url) } catch where Self.isNoSuchFile(error) { return try write(data, to: url) }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }

    public func move(_ url: URL, to destination: URL) throws {
        try remove(destination)
        try FileManager.default.moveItem(at: url, to: destination)
    }

    public func remove(_ url: URL) throws {
        do { try FileManager.default.removeItem(at: url) } catch where Self.isNoSuchFile(error) {}
    }

    public func contents(of directory: URL) throws -> [URL] {
        do {
            return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        } catch where Self.isNoSuchFile(error) {
            return []
        }
    }

    /// Whether `error` says there is no such file (`ENOENT`, as the POSIX error Foundation wraps, or as
    /// Foundation's own code when it wraps none).
    static func isNoSuchFile(_ error: any Error) -> Bool {
        let error = error as NSError
        let noEntry = Int(POSIXError.Code.ENOENT.rawValue)
        if error.domain == NSPOSIXErrorDomain { return error.code == noEntry }
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return underlying.code == noEntry
        }
        return error.domain == NSCocoaErrorDomain
            && [CocoaError.Code.fileNoSuchFile.rawValue, CocoaError.Code.fileReadNoSuchFile.rawValue].contains(error.code)
    }
}

/// What reading a file gave: the three failures are told apart because each asks for something else.
enum Loaded<Value> {
    /// No file: nothing was ever saved (or it was deleted).
    case missing
    /// The file exists and cannot be read now (no permission, a locked device): run in memory, never
    /// overwrite it, read it again later.
    case unavailable(any Error)
    /// The file was read and makes no sense (truncated, not JSON): moved aside, never silently replaced.
    case corrupt(any Error)
    case loaded(Value)
}

/// The SDK's files in its storage directory: `install-id` (its own file, kept out of backups so that a
/// restore onto another device does not clone the install), `state.json` and `queue.jsonl` (see
/// `EventQueue`: appended to, and rewritten only when most of it is no longer queued).
struct ClientFiles: Sendable {
    let directory: URL
    let fileSystem: any UpshiftFileSystem

    var installIdURL: URL { directory.appendingPathComponent("install-id") }
    var stateURL: URL { directory.appendingPathComponent("state.json") }
    var queueURL: URL { directory.appendingPathComponent("queue.jsonl") }
    /// The queue of SDK versions that rewrote one JSON array (read once, then removed).
    var legacyQueueURL: URL { directory.appendingPathComponent("queue.json") }

    func load<Value>(_ url: URL, _ parse: (Data) throws -> Value) -> Loaded<Value> {
        let data: Data?
        do { data = try fileSystem.read(url) } catch { return .unavailable(error) }
        guard let data else { return .missing }
        do { return .loaded(try parse(data)) } catch { return .corrupt(error) }
    }

    func loadInstallId() -> Loaded<UUID> {
        load(installIdURL) { data in
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let id = UUID(uuidString: text) else { throw CorruptFile(description: "not a UUID") }
            return id
        }
    }

    func saveInstallId(_ id: UUID) throws {
        try fileSystem.write(Data(id.uuidString.lowercased().utf8), to: installIdURL)
        ApplePlatform.excludeFromBackup(installIdURL)
    }

    func loadState() -> Loaded<ClientState> {
        load(stateURL) { try CatalogCoding.decoder().decode(ClientState.self, from: $0) }
    }

    func saveState(_ state: ClientState) throws {
        try fileSystem.write(try CatalogCoding.encoder().encode(state), to: stateURL)
    }

    /// The queue, line by line (`EventQueue.parse`). The queue file of earlier SDK versions (one JSON
    /// array) comes first when it is still there; the next rewrite removes it.
    func loadQueue() -> Loaded<EventQueue> {
        let legacy = load(legacyQueueURL) { try JSONDecoder().decode([QueuedEvent].self, from: $0) }
        if case .unavailable(let error) = legacy { return .unavailable(error) }
        let lines = load(queueURL, EventQueue.parse)
        var queue: EventQueue
        switch lines {
        case .missing: queue = EventQueue()
        case .loaded(let stored): queue = stored
        case .unavailable, .corrupt: return lines
        }
        switch legacy {
        case .loaded(let events): queue.takeOver(events)
        case .corrupt: queue.takeOver([])
        case .missing, .unavailable:
            if case .missing = lines { return .missing }
        }
        return .loaded(queue)
    }

    func appendToQueue(_ lines: [EventQueue.Line]) throws {
        try fileSystem.append(try EventQueue.encode(lines), to: queueURL)
    }

    /// Writes the queue file anew with only what `queue` holds (compaction).
    func rewriteQueue(_ queue: EventQueue) throws {
        try fileSystem.write(try EventQueue.encode(queue.compactedLines), to: queueURL)
        try fileSystem.remove(legacyQueueURL)
    }

    /// Keeps a file that could not be read for whoever investigates, out of the SDK's way.
    func moveAside(_ url: URL, at date: Date) throws {
        let stamp = Int(date.timeIntervalSince1970)
        try fileSystem.move(url, to: url.deletingLastPathComponent().appendingPathComponent("\(url.lastPathComponent).corrupt-\(stamp)"))
    }

    /// Deletes the SDK's files and the copies it moved aside, and nothing else: the directory may be one
    /// the app keeps its own files in. Every file is tried; the first failure is thrown.
    func removeAll() throws {
        let own = [installIdURL, stateURL, queueURL, legacyQueueURL]
        var failure: (any Error)?
        func remove(_ url: URL) {
            do { try fileSystem.remove(url) } catch { failure = failure ?? error }
        }
        own.forEach(remove)
        do {
            let names = own.map { $0.lastPathComponent + ".corrupt-" }
            for url in try fileSystem.contents(of: directory) where names.contains(where: { url.lastPathComponent.hasPrefix($0) }) {
                remove(url)
            }
        } catch {
            failure = failure ?? error
        }
        if let failure { throw failure }
    }
}

struct CorruptFile: Error, CustomStringConvertible {
    let description: String
}
