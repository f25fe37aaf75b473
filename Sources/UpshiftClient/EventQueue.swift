import Foundation
import UpshiftWire

/// An event waiting to be sent: its wire JSON without the install id (added when it is sent), with the id
/// it keeps across retries.
struct QueuedEvent: Codable, Sendable, Equatable {
    var id: String
    var body: [String: JSONValue]
}

/// The events waiting to be sent, oldest first, and how `queue.jsonl` keeps them with few writes.
///
/// The file is a log of JSON lines: an event queued is a line appended; events taken off the queue (sent,
/// refused by the server, or dropped from a full queue) are one line appended that names them. A line that
/// no longer holds a queued event is dead. The file is compacted (written anew with the queued events only)
/// when its dead lines are at least as many as its live ones and at least `compactionMinimum`, or when
/// nothing is queued any more (then it is empty, or one line with the count of dropped events). So the
/// lines written per change stay constant on average, whatever the queue's length: at capacity, where each
/// `record` adds one event and drops one (two dead lines), a rewrite of `capacity` lines comes once every
/// `max(capacity, compactionMinimum) / 2` events; a batch acknowledged costs one appended line.
struct EventQueue: Sendable {
    /// Dead lines a file keeps at least before it is compacted (unless nothing is queued).
    static let compactionMinimum = 128

    /// A line of the file.
    enum Line: Sendable, Equatable {
        case event(QueuedEvent)
        /// Taken off the queue: sent, or refused by the server.
        case sent([String])
        /// Dropped from a full queue (counted).
        case evicted([String])
        /// How many events were dropped before the file was last compacted (its first line then).
        case evictedEarlier(Int)
    }

    /// What the file needs after a change.
    enum Write: Equatable {
        case none
        case append([Line])
        case rewrite
    }

    private(set) var events: [QueuedEvent] = []
    /// Events dropped from a full queue since the install.
    private(set) var evicted = 0
    /// Lines of the file that hold nothing queued: events taken off, marks, lines that did not decode.
    private(set) var deadLines = 0
    /// Lines that did not decode when the file was read (a write cut short).
    private(set) var unreadableLines = 0
    /// The file does not hold what this queue does (lines did not decode, a write failed, events came from
    /// elsewhere): the next write rewrites it.
    private(set) var fileIsStale = false

    init() {}

    func contains(_ id: String) -> Bool {
        events.contains { $0.id == id }
    }

    /// Queues `event`; beyond `capacity` the oldest are dropped and counted.
    mutating func append(_ event: QueuedEvent, capacity: Int) -> Write {
        events.append(event)
        return settle([.event(event)] + trim(to: capacity))
    }

    /// Takes the events `ids` names off the queue (those still queued).
    mutating func remove(_ ids: Set<String>) -> Write {
        let removed = events.filter { ids.contains($0.id) }.map(\.id)
        guard !removed.isEmpty else { return .none }
        events.removeAll { ids.contains($0.id) }
        deadLines += removed.count + 1
        return settle([.sent(removed)])
    }

    /// Deletes every queued event (the user opted out).
    mutating func removeAll() -> Write {
        deadLines += events.count
        events = []
        return settle([])
    }

    /// Drops the oldest events beyond `capacity`: the line that says so, if any.
    mutating func trim(to capacity: Int) -> [Line] {
        let excess = events.count - capacity
        guard excess > 0 else { return [] }
        let dropped = events.prefix(excess).map(\.id)
        events.removeFirst(excess)
        evicted += excess
        deadLines += excess + 1
        return [.evicted(dropped)]
    }

    /// Puts the events of the queue file of earlier SDK versions first; the next write rewrites the file.
    mutating func takeOver(_ earlier: [QueuedEvent]) {
        events = earlier + events.filter { event in !earlier.contains { $0.id == event.id } }
        fileIsStale = true
    }

    /// Adds what was queued in memory while the files could not be read: its events after these (the
    /// oldest dropped beyond `capacity`) and its drops to the count. The next write rewrites the file.
    mutating func adopt(_ memory: EventQueue, capacity: Int) {
        guard !memory.events.isEmpty || memory.evicted > 0 else { return }
        events += memory.events.filter { !contains($0.id) }
        evicted += memory.evicted
        _ = trim(to: capacity)
        fileIsStale = true
    }

    /// Adds drops that an earlier SDK version counted in its state file.
    mutating func countEvicted(_ count: Int) {
        guard count > 0 else { return }
        evicted += count
        fileIsStale = true
    }

    /// The file was written anew with `compactedLines`.
    mutating func compacted() {
        deadLines = 0
        unreadableLines = 0
        fileIsStale = false
    }

    /// A write failed: the file may not hold what the queue does.
    mutating func writeFailed() {
        fileIsStale = true
    }

    private func settle(_ lines: [Line]) -> Write {
        if fileIsStale || (deadLines > 0 && (events.isEmpty || deadLines >= max(events.count, Self.compactionMinimum))) {
            return .rewrite
        }
        return lines.isEmpty ? .none : .append(lines)
    }

    /// What a compacted file holds: the count of dropped events, then the queued events.
    var compactedLines: [Line] {
        (evicted > 0 ? [.evictedEarlier(evicted)] : []) + events.map(Line.event)
    }

    /// Reads a queue file: the events in order, but those a later line took off. A line that does not
    /// decode (a write cut short) is dead and counted, and makes the next write a rewrite.
    static func parse(_ data: Data) -> EventQueue {
        var queue = EventQueue()
        var slots: [QueuedEvent?] = []
        var slotOfId: [String: Int] = [:]
        var lines = 0
        var counts = 0
        func takeOff(_ ids: [String]) -> Int {
            var found = 0
            for id in ids {
                guard let slot = slotOfId.removeValue(forKey: id) else { continue }
                slots[slot] = nil
                found += 1
            }
            return found
        }
        let decoder = JSONDecoder()
        for bytes in data.split(separator: UInt8(ascii: "\n")) where !bytes.isEmpty {
            lines += 1
            switch try? decoder.decode(Line.self, from: Data(bytes)) {
            case .event(let event)?:
                guard slotOfId[event.id] == nil else { continue }  // the same event twice: one is dead
                slotOfId[event.id] = slots.count
                slots.append(event)
            case .sent(let ids)?:
                _ = takeOff(ids)
            case .evicted(let ids)?:
                queue.evicted += takeOff(ids)
            case .evictedEarlier(let count)?:
                queue.evicted += max(count, 0)
                counts += 1
            case nil:
                queue.unreadableLines += 1
            }
        }
        queue.events = slots.compactMap { $0 }
        queue.deadLines = lines - queue.events.count - counts
        queue.fileIsStale = queue.unreadableLines > 0
        return queue
    }

    /// Lines as the file has them: one JSON object each, keys sorted.
    static func encode(_ lines: [Line]) throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = Data()
        for line in lines {
            data.append(try encoder.encode(line))
            data.append(UInt8(ascii: "\n"))
        }
        return data
    }
}

/// An event line is the event's own JSON (`id`, `body`), as SDK versions before the marks wrote it; a mark
/// is an object with one of `sent`, `evicted` or `evictedEarlier`.
extension EventQueue.Line: Codable {
    private enum Key: String, CodingKey {
        case sent, evicted, evictedEarlier
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: Key.self)
        if let ids = try container.decodeIfPresent([String].self, forKey: .sent) {
            self = .sent(ids)
        } else if let ids = try container.decodeIfPresent([String].self, forKey: .evicted) {
            self = .evicted(ids)
        } else if let count = try container.decodeIfPresent(Int.self, forKey: .evictedEarlier) {
            self = .evictedEarlier(count)
        } else {
            self = .event(try QueuedEvent(from: decoder))
        }
    }

    func encode(to encoder: any Encoder) throws {
        func mark(_ value: some Encodable, _ key: Key) throws {
            var container = encoder.container(keyedBy: Key.self)
            try container.encode(value, forKey: key)
        }
        switch self {
        case .event(let event): try event.encode(to: encoder)
        case .sent(let ids): try mark(ids, .sent)
        case .evicted(let ids): try mark(ids, .evicted)
        case .evictedEarlier(let count): try mark(count, .evictedEarlier)
        }
    }
}
