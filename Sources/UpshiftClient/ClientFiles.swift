import Foundation
import UpshiftWire

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
        Self.loadInstallId(installIdURL, fileSystem)
    }

    /// The install id the app shares with its extensions in `directory` (`install-id`).
    static func sharedInstallIdURL(_ directory: URL) -> URL { directory.appendingPathComponent("install-id") }

    static func loadInstallId(_ url: URL, _ fileSystem: any UpshiftFileSystem) -> Loaded<UUID> {
        ClientFiles(directory: url.deletingLastPathComponent(), fileSystem: fileSystem).load(url) { data in
            let text = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard let id = UUID(uuidString: text) else { throw CorruptFile(description: "not a UUID") }
            return id
        }
    }

    func saveInstallId(_ id: UUID) throws {
        try fileSystem.write(Data(id.uuidString.lowercased().utf8), to: installIdURL)
        fileSystem.excludeFromBackup(installIdURL)
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
