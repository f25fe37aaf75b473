import Foundation
import Logging
import Metrics
import UpshiftCore

/// The check's observations: a check that names its install is recorded as a `checked` event, queued on
/// the ingestion writer without waiting. A full queue or a database that is down drops the event, counted
/// in `upshift_check_observations_dropped_total` and logged at most every 10 s.
struct CheckObservations: Sendable {
    let writer: IngestionWriter
    /// Events the writer may hold for observations before it drops them.
    let buffer: Int
    let logger: Logger
    /// `upshift_check_observations_total`: `checked` events queued.
    let observed: Counter
    /// `upshift_check_observations_dropped_total`.
    let dropped: Counter
    let droppedLog = LogThrottle()

    init(writer: IngestionWriter, buffer: Int, metrics: any MetricsFactory, logger: Logger) {
        self.writer = writer
        self.buffer = buffer
        self.logger = logger
        observed = Counter(label: "upshift_check_observations_total", factory: metrics)
        dropped = Counter(label: "upshift_check_observations_dropped_total", factory: metrics)
    }

    /// Records a `checked` event; never waits, and counts what it could not keep.
    func record(
        _ decision: CheckAnswerCache.Answer, of request: CheckRequest, installId: UUID, appId: AppID, now: Date
    ) {
        var data = EventData()
        data.add("action", decision.action.rawValue)
        data.add("reason", decision.reason.rawValue)
        data.add("latestVersion", decision.latestVersion)
        data.add("build", request.build)
        data.add("osVersion", request.os?.text)
        data.add("locale", request.locale)
        data.add("channel", request.channel.rawValue)
        let event = Event(
            id: UUIDText.random(), type: .checked, occurredAt: now, appId: appId, installId: installId, platform: request.platform,
            appVersion: request.version.text, data: data.json)
        observed.increment()
        writer.offer([event], limit: buffer) { [dropped, droppedLog, logger] result in
            if case .failure(let error) = result {
                dropped.increment()
                // In an outage every check drops one: the first is logged, then a count every 10 s.
                droppedLog.occurred { count in
                    logger.warning(
                        "check observations dropped",
                        metadata: ["count": "\(count)", "reason": "\(error)", "app.id": "\(appId)", "every": "\(droppedLog.interval)"])
                }
            }
        }
    }
}
