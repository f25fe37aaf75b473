/// The faults of one `scripts/chaos` run, drawn from its seed: three SIGKILLs of `upshift serve` (each
/// followed by a restart), one immediate restart of PostgreSQL and one partition (every packet between the
/// server and PostgreSQL dropped for ``partitionSeconds``), at moments measured in seconds from the start
/// of the load.
///
/// The load runs alone for a warm-up (a tenth of the run, at least 5 s) and after the faults for a tail (a
/// fifth, at least 10 s), so that the rates before and after show. The span between is cut into five
/// equal slots, one fault per slot; the seed picks which slot restarts PostgreSQL, which partitions, and where in the first
/// 60 % of its slot each fault falls, so two faults are always at least 40 % of a slot apart. The run
/// itself never starts a fault while the server is down (it restarts the server and waits until it is
/// ready first) and never kills the server before ingestion recovered from the PostgreSQL restart, or the
/// recovery bound passed: a planned moment is the earliest a fault may happen, not a promise.
public struct ChaosPlan: Sendable, Equatable {
    public enum Fault: String, Sendable, Equatable {
        /// `kill -9` of `upshift serve`, then the same binary started again on the same port.
        case killServer = "SIGKILL upshift serve, restart it"
        /// `pg_ctl restart -m immediate` of the run's own cluster, while the server runs.
        case restartPostgres = "pg_ctl restart -m immediate"
        /// An nftables rule drops every packet between the server and PostgreSQL, both ways, as when the
        /// server's host vanishes; lifted after ``ChaosPlan/partitionSeconds``.
        case partitionServer = "black hole between server and PostgreSQL"
    }

    public struct Step: Sendable, Equatable {
        /// Seconds from the start of the load.
        public var at: Double
        public var fault: Fault

        public init(at: Double, fault: Fault) {
            self.at = at
            self.fault = fault
        }
    }

    public static let serverKills = 3
    public static let postgresRestarts = 1
    public static let partitions = 1
    /// How long a partition lasts: past the leader's heartbeat misses (5.5 s at most) and a standby's
    /// bound for an idle holder (7 s), so that the server's own runners end the sessions it left behind.
    public static let partitionSeconds = 9.0
    /// Below this a run has no room for four faults between its warm-up and its tail.
    public static let minimumDuration = 30.0

    public let seed: UInt64
    public let duration: Double
    /// In time order.
    public let steps: [Step]

    public init(seed: UInt64, duration: Double) {
        precondition(duration >= Self.minimumDuration, "a chaos run lasts at least \(Self.minimumDuration) s")
        self.seed = seed
        self.duration = duration
        var random = SeededRandom(seed: seed)
        let slots = Self.serverKills + Self.postgresRestarts + Self.partitions
        let postgresSlot = random.index(slots)
        let partitionSlot = (postgresSlot + 1 + random.index(slots - 1)) % slots
        let first = Self.warmUp(duration), span = Self.faultSpan(duration)
        let slot = span / Double(slots)
        steps = (0..<slots).map { index in
            Step(
                at: first + Double(index) * slot + random.unit() * slot * 0.6,
                fault: index == postgresSlot ? .restartPostgres : index == partitionSlot ? .partitionServer : .killServer)
        }
    }

    /// Seconds of load before the first fault may happen.
    public static func warmUp(_ duration: Double) -> Double { max(5, duration * 0.1) }

    /// Seconds of load after the last planned fault at the least.
    public static func tail(_ duration: Double) -> Double { max(10, duration * 0.2) }

    /// The seconds between the warm-up and the tail, where the faults fall.
    static func faultSpan(_ duration: Double) -> Double { duration - warmUp(duration) - tail(duration) }
}
