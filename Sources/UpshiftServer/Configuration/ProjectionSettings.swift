import Foundation
import UpshiftStore

/// How the projection runner batches, polls and stands by.
public struct ProjectionSettings: Sendable {
    /// Events read per batch (a batch is one transaction).
    public var batchSize = 5_000
    /// How long an idle runner waits for a wake-up from ingestion before it reads the feed anyway
    /// (commits of other instances only reach it this way).
    public var pollInterval: Duration = .milliseconds(500)
    /// How often a standby tries to take over the lock of a projection another instance runs.
    public var standbyInterval: Duration = .seconds(1)
    /// The longest a transaction of the runner that writes (a batch, a write of a catch-up's step) may hold
    /// a transaction id (`UPSHIFT_PROJECTION_MAX_XID_SECONDS`): while one does, every feed in the cluster
    /// waits for it (docs/ARCHITECTURE.md, "The horizon is cluster-wide"). Each such transaction is sized
    /// by how long the last ones took to take about a fifth of this (``xidTarget``), so that a slower machine,
    /// a larger event or a colder cache still leaves it well within the bound.
    public var maximumXidHold: Duration = .seconds(5)
    /// A statement of a runner (a read, or a whole batch) taking longer has its connection closed, and
    /// the runner starts over from the stored checkpoint. (A closed connection fails it at once.)
    public var batchTimeout: Duration = .seconds(120)
    /// A generation at the start of the log (a first start, a rebuild) catches up set-based in steps
    /// (`Backfill`) when the feed holds at least this many events, once fewer than this many lie beyond
    /// the snapshot horizon (it waits for open transactions); nil: always in batches.
    public var backfillThreshold: Int? = 50_000
    /// How long one attempt of such a catch-up may take before its connection is closed; the next attempt
    /// continues after the last step it committed.
    public var backfillTimeout: Duration = .seconds(3_600)
    /// Events of the log per install range of a catch-up's large statements: each range is a step, read
    /// by one statement that scans the whole log (more ranges, more scans) and whose sorts' temporary
    /// files this bounds (about 150 bytes an event); a restart within a step repeats that step.
    public var backfillChunkEvents = 16_000_000
    /// Rows per transaction of such a step: while a transaction writes, it holds back every feed
    /// (docs/ARCHITECTURE.md, "The horizon is cluster-wide"), so each holds a transaction id a fraction
    /// of a second.
    public var backfillRowsPerWrite = 20_000
    /// A rebuild's catch-up (a generation built beside the active one, which serves meanwhile) runs its
    /// statements without parallel workers and pauses after each step this many times as long as the
    /// step took, leaving the machine to the projections that serve; 0: at full speed, as a first start's
    /// catch-up always runs.
    public var rebuildRest: Double = 1
    /// A rebuild sizes each write of its catch-up's large steps (at most ``backfillRowsPerWrite`` rows),
    /// and then each of its batches until it is switched in (at most ``batchSize`` events), to take
    /// about this long: a transaction that writes holds back every feed, so the projections that serve
    /// meanwhile wait about that long for their events; nil: always those maxima.
    public var rebuildWriteTarget: Duration? = .milliseconds(250)
    /// How often a runner asks whether erased installs are to leave its figures (docs/OPERATIONS.md,
    /// "Erasure of an install").
    public var erasureInterval: Duration = .seconds(1)
    /// How often the erasure worker takes the open requests (`UPSHIFT_ERASURE_INTERVAL`, seconds), and
    /// how long a pass waits for the projections to apply the installs' events before it leaves them to
    /// the next.
    public var erasurePass: Duration = .seconds(10)
    /// How often the rollout worker evaluates the rules (`UPSHIFT_RULES_INTERVAL`, seconds), by the
    /// application's clock.
    public var rulesInterval: TimeInterval = 300
    /// What each writing transaction is sized to take: a fifth of ``maximumXidHold``, and no more than
    /// ``rebuildWriteTarget`` for a rebuild beside projections that serve.
    public func xidTarget(rebuilding: Bool) -> Duration {
        let bound = maximumXidHold / 5
        guard rebuilding, let rebuild = rebuildWriteTarget else { return bound }
        return min(bound, rebuild)
    }

    /// Tests only: runs after each committed step of a catch-up, with the projection, the step's name and
    /// its number; what it throws stops the attempt there.
    public var afterBackfillStep: (@Sendable (_ projection: String, _ step: String, _ number: Int) async throws -> Void)?
    /// Tests only: runs after each committed write of a catch-up's step that writes in several
    /// transactions (not after its last), with the projection and the step's name; what it throws stops
    /// the attempt there, within the step.
    public var afterBackfillWrite: (@Sendable (_ projection: String, _ step: String) async throws -> Void)?
    /// Tests only: runs inside each batch's transaction after its writes, before the commit; what it
    /// throws rolls the batch back. Given the projection's name.
    public var beforeCommit: (@Sendable (String) async throws -> Void)?

    public init() {}
}

extension ProjectionSettings {
    /// How a catch-up runs: a rebuild's (a generation built beside the active one) rests after each step.
    func backfillOptions(rebuilding: Bool) -> Backfill.Options {
        var options = Backfill.Options()
        options.chunkEvents = backfillChunkEvents
        options.rowsPerWrite = backfillRowsPerWrite
        options.rest = rebuilding ? rebuildRest : 0
        options.writeTarget = xidTarget(rebuilding: rebuilding)
        options.afterStep = afterBackfillStep
        options.afterWrite = afterBackfillWrite
        return options
    }
}
