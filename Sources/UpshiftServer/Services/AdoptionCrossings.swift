import Foundation
import Logging
import UpshiftCore
import UpshiftStore

/// `adoption.crossed` (docs/OPERATIONS.md, "Webhooks"): after a UTC day closes, once the adoption projection
/// has applied every event recorded before its end, each live release of the last year is read from the
/// adoption read model, and each threshold of a subscription that its share of active installs reached on a
/// day since the subscription's creation is told to it, once (``WebhookStore/cross(_:platform:version:threshold:day:body:now:)``
/// records it in the delivery's transaction, so a second pass or a second instance tells nothing again).
struct AdoptionCrossings: Sendable {
    let webhooks: WebhookStore
    let catalog: CatalogStore
    let reports: ReportStore
    let projections: ProjectionStore
    let logger: Logger

    /// The releases watched: released within this many days before the day that closed.
    static let watchedDays = AdoptionReport.maximumDays - 1

    /// Evaluates the last closed day before `now` unless `done` is it already; returns the day evaluated
    /// (nil: none, as the projection has not applied the day's events yet).
    func evaluate(now: Date, done: UTCDay?) async throws -> UTCDay? {
        let closed = UTCDay(number: UTCDay(now).number - 1)
        guard done != closed else { return nil }
        let end = closed.start.addingTimeInterval(86_400)
        guard let state = try await projections.freshness(now: now)["adoption"], !state.rebuilding,
            state.lagSeconds <= now.timeIntervalSince(end)
        else { return nil }
        let subscriptions = Dictionary(grouping: try await webhooks.subscriptions(to: .adoptionCrossed), by: \.appId)
        var told = 0
        for (appId, subscribed) in subscriptions.sorted(by: { $0.key < $1.key }) {
            guard let app = try await catalog.app(id: appId) else { continue }
            let recorded = try await webhooks.crossings(app: appId)
            for platform in app.platforms {
                let releases = app.releases(for: platform).filter { release in
                    release.status == .live && release.releasedAt < end
                        && UTCDay(release.releasedAt).number >= closed.number - Self.watchedDays
                }
                guard let first = releases.map({ UTCDay($0.releasedAt).number }).min() else { continue }
                let from = UTCDay(number: first)
                let read = try await reports.adoption(app: appId, platform: platform, from: from, to: closed)
                let report = AdoptionReport(app: appId, platform: platform, from: from, to: closed, rows: read.value, dataAsOf: read.dataAsOf)
                for release in releases {
                    let released = UTCDay(release.releasedAt).number
                    let days = report.days.filter { (UTCDay($0.day)?.number ?? 0) >= released }
                    for webhook in subscribed {
                        let since = UTCDay(webhook.createdAt).number
                        for crossing in AdoptionCrossing.crossings(days, release: release.version, thresholds: webhook.thresholds)
                        where (UTCDay(crossing.day)?.number ?? 0) >= since
                            && !recorded.contains(
                                WebhookStore.Crossing(
                                    webhook: webhook.id, platform: platform.rawValue, version: release.version.normalized,
                                    threshold: crossing.threshold))
                        {
                            let body = try CatalogCoding.json(
                                Body(
                                    app: appId.rawValue, platform: platform.rawValue, version: release.version.normalized,
                                    threshold: crossing.threshold, day: crossing.day, percent: (crossing.percent * 100).rounded() / 100,
                                    activeInstalls: crossing.activeInstalls, installs: crossing.installs))
                            if try await webhooks.cross(
                                webhook, platform: platform, version: release.version.normalized, threshold: crossing.threshold,
                                day: crossing.day, body: body, now: now)
                            {
                                told += 1
                            }
                        }
                    }
                }
            }
        }
        if told > 0 { logger.info("adoption crossings told", metadata: ["day": "\(closed)", "deliveries": "\(told)"]) }
        return closed
    }

    /// An `adoption.crossed` delivery's body (`WebhookAdoptionDelivery` in docs/openapi.yaml).
    struct Body: Encodable {
        var kind = WebhookKind.adoptionCrossed.rawValue
        let app: String
        let platform: String
        let version: String
        let threshold: Double
        let day: String
        let percent: Double
        let activeInstalls: Int
        let installs: Int
    }
}
