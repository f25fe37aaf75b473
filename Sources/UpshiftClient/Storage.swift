import Foundation
import UpshiftWire

/// What the SDK remembers across launches, in `state.json` of the storage directory. Every field decodes
/// with a default, so a file written by an older or newer SDK loads (`schemaVersion` says which wrote it).
struct ClientState: Codable, Sendable, Equatable {
    static let schemaVersion = 2

    struct StoredDecision: Codable, Sendable, Equatable {
        /// The app version and build the decision was made for: it is never used for another.
        var appVersion: String
        var build: Int?
        var decision: CheckDecision
        var receivedAt: Date
    }

    /// A migration step started and not yet finished: found at launch, it was interrupted (a crash, a kill).
    struct StepUnderWay: Codable, Sendable, Equatable {
        var version: String
        var attempts: Int
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
    /// Events dropped from a full queue, oldest first, since the install.
    var evictedEvents = 0
    /// The user opted out: nothing is recorded, checks carry no install id.
    var optedOut = false
    /// The install id of SDK versions that kept it here (moved to its own file on first load).
    var legacyInstallId: UUID?

    init() {}

    enum CodingKeys: String, CodingKey {
        case schemaVersion, launchedVersion, launchedBuild, previousVersion, whatsNew, decision, remindAfter
        case skippedVersions, migratedThrough, stepUnderWay, evictedEvents, optedOut
        case legacyInstallId = "installId"
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
        evictedEvents = try container.decodeIfPresent(Int.self, forKey: .evictedEvents) ?? 0
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
        try container.encode(evictedEvents, forKey: .evictedEvents)
        try container.encode(optedOut, forKey: .optedOut)
    }
}

/// The queue as read from its file.
struct StoredQueue {
    var events: [QueuedEvent] = []
    /// Lines that did not decode (a write cut short): dropped.
    var unreadable = 0
    /// Read (in part) from the file of earlier SDK versions, which the next rewrite removes.
    var fromLegacyFile = false
}

/// An event waiting to be sent: its wire JSON without the install id (added when it is sent), with the id
/// it keeps across retries.
struct QueuedEvent: Codable, Sendable, Equatable {
    var id: String
    var body: [String: JSONValue]
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
}

/// The device's file system; on Apple platforms files are readable from the first unlock after a restart on.
public struct DeviceFileSystem: UpshiftFileSystem {
    public init() {}

    public func read(_ url: URL) throws -> Data? {
        guard FileManager.default.fileExists(atPath: url.path) else { return nil }
        return try Data(contentsOf: url)
    }

    public func write(_ data: Data, to url: URL) throws {
        try makeDirectory(for: url)
        try data.write(to: url, options: Data.WritingOptions.atomic.union(ApplePlatform.fileProtection))
    }

    public func append(_ data: Data, to url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return try write(data, to: url) }
        let handle = try FileHandle(forWritingTo: url)
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }

    public func move(_ url: URL, to destination: URL) throws {
        if FileManager.default.fileExists(atPath: destination.path) {
            try FileManager.default.removeItem(at: destination)
        }
        try FileManager.default.moveItem(at: url, to: destination)
    }

    public func remove(_ url: URL) throws {
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        try FileManager.default.removeItem(at: url)
    }

    private func makeDirectory(for url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
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
/// restore onto another device does not clone the install), `state.json` and `queue.jsonl` (one event
/// per line, appended; rewritten only to take sent or dropped events out).
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

    /// The queue, event by event: a line that does not decode (a write cut short) is skipped and counted.
    /// The queue file of earlier SDK versions (one JSON array) comes first when it is still there.
    func loadQueue() -> Loaded<StoredQueue> {
        let legacy = load(legacyQueueURL) { try JSONDecoder().decode([QueuedEvent].self, from: $0) }
        if case .unavailable(let error) = legacy { return .unavailable(error) }
        let lines = load(queueURL) { data -> StoredQueue in
            var queue = StoredQueue()
            for line in data.split(separator: UInt8(ascii: "\n")) where !line.isEmpty {
                if let event = try? JSONDecoder().decode(QueuedEvent.self, from: Data(line)) {
                    queue.events.append(event)
                } else {
                    queue.unreadable += 1
                }
            }
            return queue
        }
        var queue: StoredQueue
        switch lines {
        case .missing: queue = StoredQueue()
        case .loaded(let stored): queue = stored
        case .unavailable, .corrupt: return lines
        }
        switch legacy {
        case .loaded(let events):
            queue.events = events + queue.events
            queue.fromLegacyFile = true
        case .corrupt:
            queue.fromLegacyFile = true  // removed with the next rewrite
        case .missing, .unavailable:
            if case .missing = lines { return .missing }
        }
        return .loaded(queue)
    }

    func appendToQueue(_ events: [QueuedEvent]) throws {
        try fileSystem.append(try Self.lines(events), to: queueURL)
    }

    func rewriteQueue(_ events: [QueuedEvent]) throws {
        try fileSystem.write(try Self.lines(events), to: queueURL)
        try fileSystem.remove(legacyQueueURL)
    }

    /// Keeps a file that could not be read for whoever investigates, out of the SDK's way.
    func moveAside(_ url: URL, at date: Date) throws {
        let stamp = Int(date.timeIntervalSince1970)
        try fileSystem.move(url, to: url.deletingLastPathComponent().appendingPathComponent("\(url.lastPathComponent).corrupt-\(stamp)"))
    }

    private static func lines(_ events: [QueuedEvent]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = Data()
        for event in events {
            data.append(try encoder.encode(event))
            data.append(UInt8(ascii: "\n"))
        }
        return data
    }
}

struct CorruptFile: Error, CustomStringConvertible {
    let description: String
}

/// UUID version 7 (RFC 9562): 48 bits of Unix milliseconds, then random bits, so ids sort by time.
enum UUIDv7 {
    static func make(at date: Date) -> UUID {
        var bytes = [UInt8](repeating: 0, count: 16)
        var generator = SystemRandomNumberGenerator()
        for index in 6..<16 { bytes[index] = UInt8.random(in: 0...255, using: &generator) }
        let millis = UInt64(max(0, date.timeIntervalSince1970 * 1000))
        for index in 0..<6 { bytes[index] = UInt8(truncatingIfNeeded: millis >> (8 * (5 - index))) }
        bytes[6] = (bytes[6] & 0x0F) | 0x70  // version 7
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return UUID(bytes)
    }
}

/// UUID version 5 (RFC 9562): SHA-1 of a namespace and a name, so the same name gives the same id on
/// every attempt (the `updated` event of one update, however often a killed launch records it).
enum UUIDv5 {
    /// The namespace of the SDK's own names (a UUIDv4 made for it).
    static let namespace = UUID(uuidString: "5f0c2c1e-8f55-4c2e-9a55-2c7f0b7e4d31")!

    static func make(_ name: String, namespace: UUID = UUIDv5.namespace) -> UUID {
        let space = namespace.uuid
        var input = [
            space.0, space.1, space.2, space.3, space.4, space.5, space.6, space.7,
            space.8, space.9, space.10, space.11, space.12, space.13, space.14, space.15,
        ]
        input.append(contentsOf: Array(name.utf8))
        var bytes = Array(SHA1.digest(input).prefix(16))
        bytes[6] = (bytes[6] & 0x0F) | 0x50  // version 5
        bytes[8] = (bytes[8] & 0x3F) | 0x80  // RFC 9562 variant
        return UUID(bytes)
    }
}

extension UUID {
    init(_ bytes: [UInt8]) {
        self.init(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}

/// SHA-1 (FIPS 180-4), for UUIDv5 names only (no security rests on it): the SDK links no crypto library.
enum SHA1 {
    static func digest(_ message: [UInt8]) -> [UInt8] {
        var h: [UInt32] = [0x6745_2301, 0xEFCD_AB89, 0x98BA_DCFE, 0x1032_5476, 0xC3D2_E1F0]
        var padded = message
        padded.append(0x80)
        while padded.count % 64 != 56 { padded.append(0) }
        let bits = UInt64(message.count) * 8
        for shift in stride(from: 56, through: 0, by: -8) { padded.append(UInt8(truncatingIfNeeded: bits >> UInt64(shift))) }
        var w = [UInt32](repeating: 0, count: 80)
        for chunk in stride(from: 0, to: padded.count, by: 64) {
            for i in 0..<16 {
                w[i] = (0..<4).reduce(0) { $0 << 8 | UInt32(padded[chunk + 4 * i + $1]) }
            }
            for i in 16..<80 {
                let x = w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]
                w[i] = x << 1 | x >> 31
            }
            var (a, b, c, d, e) = (h[0], h[1], h[2], h[3], h[4])
            for i in 0..<80 {
                let (f, k): (UInt32, UInt32) =
                    switch i {
                    case 0..<20: ((b & c) | (~b & d), 0x5A82_7999)
                    case 20..<40: (b ^ c ^ d, 0x6ED9_EBA1)
                    case 40..<60: ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC)
                    default: (b ^ c ^ d, 0xCA62_C1D6)
                    }
                let temp = (a << 5 | a >> 27) &+ f &+ e &+ k &+ w[i]
                (e, d, c, b, a) = (d, c, b << 30 | b >> 2, a, temp)
            }
            h[0] &+= a
            h[1] &+= b
            h[2] &+= c
            h[3] &+= d
            h[4] &+= e
        }
        return h.flatMap { word in (0..<4).map { UInt8(truncatingIfNeeded: word >> UInt32(24 - 8 * $0)) } }
    }
}
