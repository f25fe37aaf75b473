/// A table that keeps at most `capacity` units (entries, or bytes as the caller counts them) and, to make
/// room, forgets the least recently used entries first. Every operation is O(1): eviction never scans
/// the table, so a caller may hold a lock around it on a hot path. Not thread-safe by itself.
struct LRUTable<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var cost: Int
    }

    /// The neighbours of a slot in recency order (-1: none), apart from the nodes so that marking an
    /// entry used never copies its key or value.
    private struct Links {
        var newer = -1
        var older = -1
    }

    let capacity: Int
    /// The units held now: never above `capacity`.
    private(set) var used = 0
    private var index: [Key: Int] = [:]
    private var nodes: [Node?] = []
    private var links: [Links] = []
    private var free: [Int] = []
    private var newest = -1
    private var oldest = -1

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { index.count }

    /// The value for `key`, marked as just used.
    mutating func value(for key: Key) -> Value? {
        guard let slot = index[key] else { return nil }
        moveToFront(slot)
        return nodes[slot]!.value
    }

    /// The value for `key`, without marking it used.
    func peek(_ key: Key) -> Value? {
        index[key].map { nodes[$0]!.value }
    }

    /// Stores `value` under `key` at `cost` units, evicting the least recently used entries until it
    /// fits. An entry that alone exceeds the capacity is not stored.
    mutating func set(_ value: Value, for key: Key, cost: Int = 1) {
        remove(key)
        guard cost <= capacity else { return }
        while used + cost > capacity, oldest >= 0 {
            remove(nodes[oldest]!.key)
        }
        let node = Node(key: key, value: value, cost: cost)
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
            links.append(Links())
        }
        link(slot)
        index[key] = slot
        used += cost
    }

    /// Changes the value of an entry in place (same cost), marking it used; nothing when absent.
    mutating func update(_ key: Key, _ change: (inout Value) -> Void) {
        guard let slot = index[key] else { return }
        change(&nodes[slot]!.value)
        moveToFront(slot)
    }

    mutating func remove(_ key: Key) {
        guard let slot = index.removeValue(forKey: key), let cost = nodes[slot]?.cost else { return }
        unlink(slot)
        nodes[slot] = nil
        free.append(slot)
        used -= cost
    }

    mutating func removeAll() {
        self = LRUTable(capacity: capacity)
    }

    private mutating func moveToFront(_ slot: Int) {
        guard newest != slot else { return }
        unlink(slot)
        link(slot)
    }

    /// Makes `slot` the newest.
    private mutating func link(_ slot: Int) {
        links[slot] = Links(newer: -1, older: newest)
        if newest >= 0 { links[newest].newer = slot }
        newest = slot
        if oldest < 0 { oldest = slot }
    }

    private mutating func unlink(_ slot: Int) {
        let around = links[slot]
        if around.newer >= 0 { links[around.newer].older = around.older } else { newest = around.older }
        if around.older >= 0 { links[around.older].newer = around.newer } else { oldest = around.newer }
    }
}
