import Testing

/// How `scripts/test` schedules the suites, said by the suites themselves: one run of every suite without
/// these tags, then the `timed` ones, then the `alone` ones. Two cores shared by every suite of a run
/// measure the load rather than the server, so the suites that bound a time run apart from the rest, and
/// those that hold the machine or the cluster for themselves run one at a time.
extension Tag {
    /// Bounds how long the server takes (a standby within 30 s, a policy on another instance within 3 s, a
    /// flush before its timeout, an exit within 8 s, a rebuild that waits for every open write transaction
    /// of the cluster): run together, after the untagged suites.
    @Tag public static var timed: Self
    /// Holds the machine or the cluster for itself, or bounds a time too tightly to share it (a fleet
    /// simulation, hundreds of slow connections, clusters of its own, write transactions held open for
    /// seconds, a rollout step within 3 s, the SDK's answer from a stalled server within 2 s, a transaction id
    /// held at most 1.5 s):
    /// run last, one suite at a time (``RunsAlone``).
    @Tag public static var alone: Self
}

/// The suites of each tag as `swift test --filter` patterns. This toolchain's `--filter` matches test ids
/// only (selecting by `tag:` came to Swift Testing after 6.3.1), so `scripts/test` reads these two lines
/// (`upshift_suites` in scripts/lib/common.sh), and `ScheduleTests` checks that each names exactly the
/// suites that carry its tag.
public enum Schedule {
    public static let timed = "AppEditTests|AppStoreImportTests|CatalogPropagationTests|HostileInputTests|IngestionTests|OperatorMetricsTests|OutageTests|ProjectionRunnerTests|RebuildEquivalenceTests|ShutdownTests"
    public static let alone = "ClientSDKTests|ConnectionLimitsTests|HostLossTests|HotPathTests|ProjectionXidHoldTests|ReplicaReportsTests|RetentionTests|RolloutScheduleEndpointTests|SimulationTests|TwoInstancesTests"
}

/// A suite that runs by itself among the suites of its process: it waits for the one before it to end.
public struct RunsAlone: SuiteTrait, TestScoping {
    public var isRecursive: Bool { false }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await Self.turn.acquire()
        do {
            try await function()
        } catch {
            await Self.turn.release()
            throw error
        }
        await Self.turn.release()
    }

    /// One suite at a time, in the order they asked.
    private static let turn = Turn()

    private actor Turn {
        private var taken = false
        private var waiting: [CheckedContinuation<Void, Never>] = []

        func acquire() async {
            guard taken else {
                taken = true
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty { taken = false } else { waiting.removeFirst().resume() }
        }
    }
}

extension Trait where Self == RunsAlone {
    /// Tagged `alone` and run one at a time (``RunsAlone``).
    public static var runsAlone: Self { RunsAlone() }
}

extension Trait where Self == TimeLimitTrait {
    /// The bound of each test of a suite that starts a server: a test still running after it fails,
    /// naming itself, before `scripts/test` ends its phase (20 minutes).
    public static var serverTimeLimit: Self { .timeLimit(.minutes(15)) }
}
