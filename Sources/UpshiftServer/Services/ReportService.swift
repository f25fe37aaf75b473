import Foundation
import UpshiftCore
import UpshiftStore

/// The reports (docs/PROJECTIONS.md, "What the reports count") as values: what the JSON/CSV API and the
/// dashboard both show, each with its `dataAsOf`. The store reads the reports database (a replica when one is
/// configured); the catalog the minimum-impact report needs comes from the snapshot, which follows the
/// primary. A projection that has no tables yet throws `ReportStore.NotReady` (a `503`).
struct ReportService: Sendable {
    let store: ReportStore
    let snapshot: CatalogSnapshot
    let clock: any WallClock
    /// Backtests take a slot of the token's and of the instance's (``ReaderShares/backtest(_:)``).
    let readers: ReaderShares

    func adoption(app: AppID, platform: Platform, from: UTCDay, to: UTCDay) async throws -> AdoptionReport {
        let read = try await store.adoption(app: app, platform: platform, from: from, to: to)
        var report = AdoptionReport(app: app, platform: platform, from: from, to: to, rows: read.value, dataAsOf: read.dataAsOf)
        report.eventsFrom = read.eventsFrom
        return report
    }

    /// Nil when the app has no such release (yet).
    func release(app: AppID, platform: Platform, version: Version) async throws -> ReleaseReport? {
        let releases = snapshot.app(app)?.catalog.releases[platform] ?? []
        let previous = releases.first { $0.version == version }.flatMap { ReleaseHealth.previous(of: $0, among: releases) }
        guard let read = try await store.release(app: app, platform: platform, version: version, previous: previous?.version)
        else { return nil }
        let figures = read.value
        let now = clock.now()
        let health = ReleaseHealth(
            release: ReleaseHealth.Input(version: version.normalized, releasedAt: figures.releasedAt, days: figures.health),
            previous: previous.map {
                ReleaseHealth.Input(version: $0.version.normalized, releasedAt: $0.releasedAt, days: figures.previousHealth)
            }, now: now)
        var report = ReleaseReport(
            app: app, platform: platform, version: version.normalized, releasedAt: figures.releasedAt, now: now,
            cohort: figures.cohort, updatedByDay: figures.updatedByDay, medianMilliseconds: figures.medianMilliseconds,
            p90Milliseconds: figures.p90Milliseconds, health: health, dataAsOf: read.dataAsOf)
        report.eventsFrom = read.eventsFrom
        return report
    }

    func funnels(app: AppID, platform: Platform, target: Version?) async throws -> PromptFunnelReport {
        let read = try await store.funnels(app: app, platform: platform, target: target)
        var report = PromptFunnelReport(app: app, platform: platform, funnels: read.value, dataAsOf: read.dataAsOf)
        report.eventsFrom = read.eventsFrom
        return report
    }

    /// The policy backtest of `proposed` against `current` (both as the check would serve them) at `now`.
    func backtest(
        app: AppID, platform: Platform, windowDays: Int, now: Date, current: AppCatalog, proposed: AppCatalog
    ) async throws -> BacktestReport {
        try await readers.backtest {
            try await runBacktest(app: app, platform: platform, windowDays: windowDays, now: now, current: current, proposed: proposed)
        }
    }

    private func runBacktest(
        app: AppID, platform: Platform, windowDays: Int, now: Date, current: AppCatalog, proposed: AppCatalog
    ) async throws -> BacktestReport {
        let since = now.addingTimeInterval(-Double(windowDays) * 86_400)
        let idsBelow = Backtest.idsBelow(platform: platform, catalogs: [current, proposed], now: now)
        let read = try await store.backtestInstalls(
            app: app, platform: platform, since: since, idsBelow: idsBelow,
            channelMatters: Backtest.channelMatters(platform: platform, catalogs: [current, proposed]))
        var report = try await Backtest.run(
            app: app, platform: platform, windowDays: windowDays, now: now, current: current, proposed: proposed,
            counts: read.value.counts, installs: read.value.installs, dataAsOf: read.dataAsOf)
        report.eventsFrom = read.eventsFrom
        return report
    }

    func minimumImpact(app: AppID, platform: Platform, minimum: Version, windowDays: Int) async throws -> MinimumImpactReport {
        let now = clock.now()
        let since = now.addingTimeInterval(-Double(windowDays) * 86_400)
        let read = try await store.activeInstalls(app: app, platform: platform, since: since)
        var report = MinimumImpactReport(
            app: app, platform: platform, minimum: minimum, windowDays: windowDays,
            releases: snapshot.app(app)?.catalog.releases[platform] ?? [], now: now, groups: read.value,
            dataAsOf: read.dataAsOf)
        report.eventsFrom = read.eventsFrom
        return report
    }
}
