import Foundation
import UpshiftCore

/// What the SDK remembers across launches, in `state.json` of the storage directory.
struct ClientState: Codable, Sendable, Equatable {
    struct StoredDecision: Codable, Sendable, Equatable {
        /// The app version and build the decision was made for: it is never used for another.
        var appVersion: String
        var build: Int?
        var decision: CheckDecision
        var receivedAt: Date
    }

    var installId = UUIDv7.make(at: Date())
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
    /// The version of the last migration step that completed.
    var migratedThrough: String?
    /// Events dropped from a full queue, oldest first, since the install.
    var evictedEvents = 0
}

/// An event waiting to be sent: its wire JSON, with the id it keeps across retries.
struct QueuedEvent: Codable, Sendable, Equatable {
    var id: String
    var body: [String: JSONValue]
}

/// Files written whole and atomically (a crash leaves the old or the new file, never half of one).
struct FileStore: Sendable {
    let directory: URL

    func load<T: Decodable>(_ type: T.Type, from name: String) -> T? {
        guard let data = try? Data(contentsOf: directory.appendingPathComponent(name)) else { return nil }
        return try? CatalogCoding.decoder().decode(type, from: data)
    }

    func save(_ value: some Encodable, to name: String) throws {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try CatalogCoding.encoder().encode(value).write(to: directory.appendingPathComponent(name), options: .atomic)
    }
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
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }
}
