import Testing

@testable import BenchmarkKit

/// The faults of a chaos run, drawn from its seed.
@Suite struct ChaosPlanTests {
    @Test(arguments: [1, 42, 7_777, UInt64.max])
    func threeKillsOneRestartAndOnePartitionBetweenTheWarmUpAndTheTail(seed: UInt64) {
        for duration in [30.0, 60, 300, 3_600] {
            let plan = ChaosPlan(seed: seed, duration: duration)
            #expect(plan.steps.filter { $0.fault == .killServer }.count == 3)
            #expect(plan.steps.filter { $0.fault == .restartPostgres }.count == 1)
            #expect(plan.steps.filter { $0.fault == .partitionServer }.count == 1)
            #expect(plan.steps.map(\.at) == plan.steps.map(\.at).sorted())
            #expect(plan.steps.first!.at >= ChaosPlan.warmUp(duration))
            #expect(plan.steps.last!.at <= duration - ChaosPlan.tail(duration))
            // Each fault at least 40 % of a slot after the one before.
            let slot = (duration - ChaosPlan.warmUp(duration) - ChaosPlan.tail(duration)) / 5
            for (before, after) in zip(plan.steps, plan.steps.dropFirst()) {
                #expect(after.at - before.at >= 0.4 * slot - 1e-9)
            }
        }
    }

    @Test func theSameSeedReplaysThePlan() {
        #expect(ChaosPlan(seed: 1, duration: 60) == ChaosPlan(seed: 1, duration: 60))
        #expect(ChaosPlan(seed: 1, duration: 60).steps != ChaosPlan(seed: 2, duration: 60).steps)
    }

    /// The seed moves the PostgreSQL restart and the partition through every slot, and the moments within
    /// the slots.
    @Test func theSeedPicksTheMoments() {
        var slots = Set<Int>(), partitions = Set<Int>()
        var moments = Set<Double>()
        for seed in UInt64(0)..<64 {
            let plan = ChaosPlan(seed: seed, duration: 300)
            slots.insert(plan.steps.firstIndex { $0.fault == .restartPostgres }!)
            partitions.insert(plan.steps.firstIndex { $0.fault == .partitionServer }!)
            moments.insert(plan.steps[0].at)
        }
        #expect(slots == [0, 1, 2, 3, 4])
        #expect(partitions == [0, 1, 2, 3, 4])
        #expect(moments.count == 64)
    }

    /// The default run: 30 s of warm-up, faults between 30 s and 240 s, a minute of tail.
    @Test func theDefaultRunKeepsAWarmUpAndATail() {
        #expect(ChaosPlan.warmUp(300) == 30)
        #expect(ChaosPlan.tail(300) == 60)
        #expect(ChaosPlan.warmUp(60) == 6)
        #expect(ChaosPlan.tail(60) == 12)
        #expect(ChaosPlan.warmUp(30) == 5)
        #expect(ChaosPlan.tail(30) == 10)
    }

    /// SplitMix64's published first outputs for seed 0 and 1234567 (so a seed replays on any platform).
    @Test func theGeneratorIsSplitMix64() {
        var zero = SeededRandom(seed: 0)
        #expect(zero.next() == 0xE220_A839_7B1D_CDAF)
        #expect(zero.next() == 0x6E78_9E6A_A1B9_65F4)
        var other = SeededRandom(seed: 1_234_567)
        #expect(other.next() == 6_457_827_717_110_365_317)
        #expect(other.next() == 3_203_168_211_198_807_973)
    }
}
