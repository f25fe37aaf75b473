/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators", 2014): the same
/// sequence for a seed on every platform and Swift version, so that `scripts/chaos --seed N` replays a run's
/// schedule and load. Swift's own generators promise no such thing.
public struct SeededRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) {
        state = seed
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1), from the top 53 bits.
    public mutating func unit() -> Double {
        Double(next() >> 11) / Double(UInt64(1) << 53)
    }

    /// True with `probability` (0...1).
    public mutating func chance(_ probability: Double) -> Bool {
        unit() < probability
    }

    /// One of `count` indices, 0..<count.
    public mutating func index(_ count: Int) -> Int {
        precondition(count > 0, "no index of an empty range")
        return Int(next() % UInt64(count))
    }
}
