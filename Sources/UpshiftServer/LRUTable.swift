/// A table that keeps at most `capacity` units (entries, or bytes as the caller counts them) and, to make
/// room, forgets the least recently used entries first. Every operation is O(1): eviction never scans
/// the table, so a caller may hold a lock around it on a hot path. Not thread-safe by itself.
struct LRUTable<Key: Hashable, Value> {
    private struct Node {
        var key: Key
        var value: Value
        var cost: Int
        var newer: Int?
        var older: Int?
    }

    let capacity: Int
    /// The units held now: never above `capacity`.
    private(set) var used = 0
    private var index: [Key: Int] = [:]
    private var nodes: [Node?] = []
    private var free: [Int] = []
    private var newest: Int?
    private var oldest: Int?

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
        while used + cost > capacity, let last = oldest {
            remove(nodes[last]!.key)
        }
        let node = Node(key: key, value: value, cost: cost, newer: nil, older: newest)
        let slot: Int
        if let reused = free.popLast() {
            slot = reused
            nodes[slot] = node
        } else {
            slot = nodes.count
            nodes.append(node)
        }
        if let first = newest { nodes[first]!.newer = slot }
        newest = slot
        if oldest == nil { oldest = slot }
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
        guard let slot = index.removeValue(forKey: key), let node = nodes[slot] else { return }
        unlink(slot, node)
        nodes[slot] = nil
        free.append(slot)
        used -= node.cost
    }

    mutating func removeAll() {
        self = LRUTable(capacity: capacity)
    }

    private mutating func moveToFront(_ slot: Int) {
        guard newest != slot, let node = nodes[slot] else { return }
        unlink(slot, node)
        nodes[slot]!.older = newest
        nodes[slot]!.newer = nil
        if let first = newest { nodes[first]!.newer = slot }
        newest = slot
        if oldest == nil { oldest = slot }
    }

    private mutating func unlink(_ slot: Int, _ node: Node) {
        if let newer = node.newer { nodes[newer]!.older = node.older } else { newest = node.older }
        if let older = node.older { nodes[older]!.newer = node.newer } else { oldest = node.newer }
    }
}
