import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// The rollout worker: advances every release's `rolloutSchedule` (``Release/advanceSchedule(now:)``)
/// as catalog writes with actor and reason `schedule`, reading the application's clock. It runs where
/// the `projections` role runs, one active instance at a time (an advisory lock; the others retry and
/// take over within ``retry``). Each write is made against the revision it was computed from, so a
/// hand edit made meanwhile wins and the step is computed again from it.
struct RolloutScheduler: Service {
    let catalog: CatalogStore
    let database: DatabaseSettings
    let clock: any WallClock
    /// The worker starts once the migrations are applied (the catalog's tables exist).
    let readiness: Readiness
    let metrics: any MetricsFactory
    let logger: Logger
    /// How often due steps are looked for: a step reaches the check within about this much.
    var interval: Duration = .milliseconds(500)
    /// How long an instance that does not hold the lock waits before it tries again.
    var retry: Duration = .seconds(2)
    /// The rules (nil: none), evaluated as the worker becomes active and then each time the application's
    /// clock passes a multiple of ``rulesInterval`` seconds since the Unix epoch (``evaluation(after:interval:)``).
    var rules: RuleEvaluator?
    var rulesInterval: TimeInterval = 300
    /// Called after a write, to refresh this instance's snapshot at once (others reload on `NOTIFY`).
    let written: @Sendable () async -> Void

    static let lockKey = "upshift:rollout-schedules"

    func run() async throws {
        await cancelWhenGracefulShutdown { await readiness.reached(.migrations) }
        while !Task.isCancelledOrShuttingDown {
            do {
                try await cancelWhenGracefulShutdown {
                    _ = try await AdvisoryLeadership.whileHolding(
                        Self.lockKey, settings: database, applicationName: "upshift-rollouts", timeout: .seconds(10),
                        logger: logger
                    ) { lease in
                        logger.info("rollout worker active")
                        var view = CatalogView()
                        var rulesDue = clock.now()
                        // The lock lives as long as its connection: a closed one means another instance may lead.
                        while !lease.isLost, !Task.isCancelled {
                            // The rules first: the tick holds and releases schedules as they decided.
                            try await view.refresh(from: catalog)
                            if let rules, clock.now() >= rulesDue {
                                rulesDue = Self.evaluation(after: clock.now(), interval: rulesInterval)
                                // A failed evaluation waits for the next interval; the schedules go on meanwhile.
                                do {
                                    let wrote = try await rules.evaluate(view.apps)
                                    for app in wrote { view.invalidate(app) }
                                    if !wrote.isEmpty { await written() }
                                } catch where !Task.isCancelled {
                                    Counter(label: "upshift_rule_evaluation_failures_total", factory: metrics).increment()
                                    logger.warning("rule evaluation failed", metadata: ["error": "\(String(reflecting: error))"])
                                }
                                try await view.refresh(from: catalog)
                            }
                            for app in try await tick(view.apps) { view.invalidate(app) }
                            try await Task.sleep(for: interval)
                        }
                    }
                }
            } catch where Task.isCancelledOrShuttingDown {
                return
            } catch {
                logger.warning("rollout worker failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: retry) }
            } catch {
                return
            }
        }
    }

    /// The next evaluation of the rules after `now`: the next multiple of `interval` seconds since the epoch, so
    /// that evaluations fall on the same instants of the clock whenever the worker started (every 5 minutes:
    /// at :00, :05, …; every day: at 00:00 UTC).
    static func evaluation(after now: Date, interval: TimeInterval) -> Date {
        Date(timeIntervalSince1970: ((now.timeIntervalSince1970 / interval).rounded(.down) + 1) * interval)
    }

    /// The catalog as last read: an app is read again when its stream head moved (``CatalogStore/heads()``).
    struct CatalogView {
        private var heads: [AppID: Int64] = [:]
        private(set) var apps: [AppID: AppCatalog] = [:]

        mutating func refresh(from catalog: CatalogStore) async throws {
            let current = try await catalog.heads()
            let moved = current.filter { app, head in heads[app] != head }
            guard !moved.isEmpty else { return }
            let load = try await catalog.load(only: moved.keys.sorted())
            for (app, head) in moved {
                apps[app] = load.apps[app]  // an app that cannot be read has no schedule to advance
                heads[app] = head
            }
        }

        /// Reads `app` again at the next refresh (the worker wrote it).
        mutating func invalidate(_ app: AppID) { heads[app] = nil }
    }

    /// Writes every step now due; the apps written (or whose write found a newer revision).
    func tick(_ apps: [AppID: AppCatalog]) async throws -> Set<AppID> {
        var changed: Set<AppID> = []
        for (appId, app) in apps.sorted(by: { $0.key < $1.key }) {
            for platform in app.releases.keys.sorted() {
                for release in app.releases(for: platform) where release.rolloutSchedule != nil {
                    let now = clock.now()
                    var advanced = release
                    // An advance rule's hold (``ScheduleHolds``): held while it says why, released once it does not.
                    let note: CatalogEvent.ScheduleNote?
                    switch rules?.holds.reason(appId, platform, release.version) {
                    case .some(.some(let reason)):
                        note = advanced.holdSchedule(reason, now: now) ?? advanced.advanceSchedule(now: now)
                    case .some(nil):
                        note = advanced.releaseHold(now: now) ?? advanced.advanceSchedule(now: now)
                    case nil:
                        note = advanced.advanceSchedule(now: now)
                    }
                    guard let note else { continue }
                    changed.insert(appId)
                    let result = advanced
                    do {
                        let write = try await catalog.updateRelease(
                            appId: appId, platform: platform, version: release.version,
                            expectedRevision: release.revision, actor: CatalogEvent.scheduleActor,
                            reason: CatalogEvent.scheduleActor, now: now, schedule: note
                        ) { _ in result }
                        Counter(label: "upshift_rollout_schedule_writes_total", factory: metrics).increment()
                        logger.notice(
                            "rollout schedule advanced",
                            metadata: [
                                "app": "\(appId)", "platform": "\(platform)", "version": "\(release.version)",
                                "step": "\(note.step.map(String.init) ?? "-")", "percent": "\(result.rolloutPercent)",
                                "skipped": "\(note.skipped)", "resumed": "\(note.resumed)", "revision": "\(write.revision)",
                            ])
                    } catch CatalogError.stale {
                        // Edited meanwhile: the next tick computes the step from the edit.
                        continue
                    }
                }
            }
        }
        if !changed.isEmpty { await written() }
        return changed
    }
}
