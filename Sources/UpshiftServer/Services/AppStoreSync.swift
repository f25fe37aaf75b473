import Foundation
import Logging
import Metrics
import ServiceLifecycle
import UpshiftCore
import UpshiftStore

/// The optional background import of App Store versions (`UPSHIFT_STORE_SYNC_INTERVAL`; docs/CLIENTS.md,
/// "Import from the App Store"): every app with a bundle id for iOS, tvOS or macOS has its lookup asked
/// at most once per interval, by one instance at a time (an advisory lock), and a new store version is
/// added as a live release (``AppStoreImporter``). It runs beside the server and never delays a check:
/// the check answers from its snapshot, which the catalog write refreshes like any other.
struct AppStoreSync: Service {
    let settings: AppStoreSyncSettings
    let importer: AppStoreImporter
    let catalog: CatalogStore
    let database: DatabaseSettings
    let clock: any WallClock
    let metrics: any MetricsFactory
    let logger: Logger
    /// The catalog's version (the in-memory snapshot's where this instance serves HTTP): a change ends the
    /// pause between rounds within ``AppStoreSyncSettings/catalogPoll``, so that an app given a bundle id is
    /// asked for at once (the schedule still holds back what is not due).
    let catalogVersion: @Sendable () async -> Int64
    /// Called after a release was added, to refresh this instance's snapshot at once (others reload on
    /// the catalog's `NOTIFY`).
    let added: @Sendable () async -> Void

    func run() async throws {
        while !Task.isCancelledOrShuttingDown {
            do {
                // A graceful shutdown does not wait for a store that is slow to answer.
                try await cancelWhenGracefulShutdown { try await round() }
            } catch where Task.isCancelledOrShuttingDown {
                return
            } catch {
                logger.warning("store sync round failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            let pause = min(settings.interval, settings.longestPause)
            do {
                try await cancelWhenGracefulShutdown { try await pauseUntilDueOrChanged(pause) }
            } catch {
                return
            }
        }
    }

    /// Sleeps `pause`, or less when the catalog changes meanwhile.
    private func pauseUntilDueOrChanged(_ pause: Duration) async throws {
        let seen = await catalogVersion()
        let clock = ContinuousClock()
        let deadline = clock.now.advanced(by: pause)
        while clock.now < deadline {
            try await Task.sleep(for: min(settings.catalogPoll, clock.now.duration(to: deadline)))
            if await catalogVersion() != seen { return }
        }
    }

    /// Asks the store for every app and platform that is due, when this instance holds the lock.
    func round() async throws {
        _ = try await AppStoreSyncSchedule.whileLeading(
            settings: database, timeout: settings.databaseTimeout, logger: logger
        ) { schedule in
            let entries = Dictionary(
                try await schedule.entries().map { ("\($0.appId) \($0.platform)", $0) }, uniquingKeysWith: { first, _ in first })
            for app in try await catalog.apps() {
                for platform in AppStoreLookup.entities.keys.sorted() where app.bundleId[platform] != nil {
                    let previous = entries["\(app.id) \(platform)"]
                    let now = clock.now()
                    if let previous, previous.nextAt > now { continue }
                    try Task.checkCancellation()
                    try await sync(app.id, platform, previous: previous, now: now, schedule: schedule)
                }
            }
        }
    }

    private func sync(
        _ appId: AppID, _ platform: Platform, previous: AppStoreSyncSchedule.Entry?, now: Date, schedule: AppStoreSyncSchedule
    ) async throws {
        let failures = previous?.failures ?? 0
        // The attempt is on record before the request goes out.
        var entry = AppStoreSyncSchedule.Entry(
            appId: appId, platform: platform, attemptedAt: now, nextAt: now.adding(settings.delay(failures: failures)),
            failures: failures, outcome: "asking", detail: nil)
        try await schedule.save(entry)
        let result: AppStoreImporter.Result
        do {
            result = try await importer.run(appId: appId, platform: platform)
        } catch let error where !(error is CancellationError) {
            result = .failed("\(error)")
        }
        Counter(label: "upshift_store_sync_total", dimensions: [("outcome", result.outcome)], factory: metrics).increment()
        var metadata: Logger.Metadata = ["app": "\(appId)", "platform": "\(platform)", "outcome": "\(result.outcome)"]
        switch result {
        case .added(let release, let revision):
            entry.failures = 0
            entry.detail = release.version.text
            metadata["version"] = "\(release.version)"
            metadata["revision"] = "\(revision)"
            logger.info("store sync added the App Store's version", metadata: metadata)
            await added()
        case .present(let version):
            entry.failures = 0
            entry.detail = version.text
            logger.debug("store sync: the App Store's version is in the catalog", metadata: metadata)
        case .notListed:
            entry.failures = 0
            logger.notice("store sync: the App Store lists no app with this bundle id", metadata: metadata)
        case .refused(let reason), .failed(let reason):
            entry.failures = failures + 1
            entry.detail = String(String.UnicodeScalarView(reason.unicodeScalars.prefix(1_000)))
            metadata["error"] = "\(reason)"
            metadata["failures"] = "\(entry.failures)"
            logger.warning("store sync added nothing", metadata: metadata)
        }
        entry.outcome = result.outcome
        entry.nextAt = now.adding(settings.delay(failures: entry.failures))
        try await schedule.save(entry)
    }
}

extension Date {
    func adding(_ duration: Duration) -> Date {
        addingTimeInterval(Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18)
    }
}
