/// What the head of every summary says about the run: when, where, what was measured, and whether
/// PostgreSQL kept its durability (docs/BENCHMARKS.md, "Performance targets": every table prints fsync
/// and synchronous_commit).
public struct RunFacts: Sendable, Equatable {
    /// "2026-11-24 16:49:32 UTC"
    public var started: String
    public var machine: MachineDescription
    /// The load averages when the summary was written.
    public var finishedLoad: String
    /// "9216595" or "9216595 + uncommitted changes".
    public var revision: String
    /// PostgreSQL's `server_version`.
    public var postgresVersion: String
    public var durability: Durability

    public init(
        started: String, machine: MachineDescription, finishedLoad: String, revision: String,
        postgresVersion: String, durability: Durability
    ) {
        self.started = started
        self.machine = machine
        self.finishedLoad = finishedLoad
        self.revision = revision
        self.postgresVersion = postgresVersion
        self.durability = durability
    }

    /// "machine: ...; finished with load ..."
    var machineLine: String { "machine: \(machine); finished with load \(finishedLoad)" }
}

/// PostgreSQL's `fsync` and `synchronous_commit` as `SHOW` printed them.
public struct Durability: Sendable, Equatable {
    public var fsync: String
    public var synchronousCommit: String

    public init(fsync: String, synchronousCommit: String) {
        self.fsync = fsync
        self.synchronousCommit = synchronousCommit
    }

    /// Both on: the figures count.
    public var isOn: Bool { fsync == "on" && synchronousCommit == "on" }

    /// "fsync=on synchronous_commit=on (server default; <note>)"
    func line(_ note: String) -> String {
        "fsync=\(fsync) synchronous_commit=\(synchronousCommit) (server default; \(note))"
    }

    static let serverSetsItToo = "upshift serve also sets synchronous_commit=on per connection"

    static let offLine = "DURABILITY OFF: fsync and synchronous_commit must be on for these figures to count"
}

/// CPU time and peak memory of an `upshift serve` process, read from /proc before it was stopped, and how
/// it exited after SIGTERM.
public struct ServerUsage: Sendable, Equatable, CustomStringConvertible {
    public var cpuSeconds: Double
    /// VmHWM, in MiB.
    public var peakRSSMiB: Double
    /// Exit status after SIGTERM (128 + signal when a signal ended it).
    public var exitStatus: Int32

    public init(cpuSeconds: Double, peakRSSMiB: Double, exitStatus: Int32) {
        self.cpuSeconds = cpuSeconds
        self.peakRSSMiB = peakRSSMiB
        self.exitStatus = exitStatus
    }

    /// "13.5 CPU-s, peak RSS 74 MiB"
    public var description: String {
        "\(Format.fixed(cpuSeconds, 1)) CPU-s, peak RSS \(Format.fixed(peakRSSMiB, 0)) MiB"
    }
}

/// A summary's text, and whether every must held (the exit status of `scripts/bench`).
public struct Summary: Sendable, Equatable {
    public var text: String
    public var mustsHold: Bool

    public init(text: String, mustsHold: Bool) {
        self.text = text
        self.mustsHold = mustsHold
    }
}

/// A summary being written line by line, with the musts it found failing.
struct SummaryWriter {
    private(set) var lines: [String] = []
    private(set) var failed = false

    mutating func line(_ text: String = "") { lines.append(text) }

    /// A must that failed: the summary says so at the end, and `scripts/bench` exits 1.
    mutating func fail() { failed = true }

    /// The lines a summary of a run against `upshift serve` starts with: its title, the machine, the
    /// revision and PostgreSQL (`postgres` after its version), durability, the rate limiter, a blank line.
    mutating func head(_ title: String, facts: RunFacts, postgres: String = "", limiter: String) {
        line(title)
        line(facts.machineLine)
        line("revision: \(facts.revision); PostgreSQL \(facts.postgresVersion)\(postgres)")
        line(facts.durability.line(Durability.serverSetsItToo))
        line("rate limiter: " + limiter)
        line()
    }

    mutating func durability(_ durability: Durability) {
        if !durability.isOn {
            line(Durability.offLine)
            fail()
        }
    }

    func finish(outputFolder: String, musts: String) -> Summary {
        var lines = lines
        lines.append("raw outputs: \(outputFolder)")
        lines.append(failed ? "musts: FAILED (see above)" : "musts: all hold (\(musts))")
        return Summary(text: lines.joined(separator: "\n") + "\n", mustsHold: !failed)
    }
}
