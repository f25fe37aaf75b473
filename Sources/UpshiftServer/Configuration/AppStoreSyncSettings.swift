/// The store sync (`UPSHIFT_STORE_SYNC_INTERVAL`, ``AppStoreSync``): how often each app's App Store lookup
/// is asked, and where.
public struct AppStoreSyncSettings: Sendable {
    /// At most one request per app and platform per interval.
    public var interval: Duration
    public var importer = AppStoreImporter.Settings()
    /// The longest wait between rounds of an unchanged catalog.
    public var longestPause: Duration = .seconds(60)
    /// How often a pause looks at the catalog's version: a change (an app given a bundle id) starts a round.
    public var catalogPoll: Duration = .milliseconds(500)
    /// The bound on connecting to the database and on each statement of the schedule.
    public var databaseTimeout: Duration = .seconds(10)

    public init(interval: Duration) {
        self.interval = interval
    }

    /// How long after an attempt the next one may be made, after `failures` failures in a row: the
    /// interval, doubled with each failure up to the larger of a day and the interval.
    public func delay(failures: Int) -> Duration {
        let ceiling = max(interval, .seconds(86_400))
        var delay = interval
        for _ in 0..<min(failures, 40) where delay < ceiling { delay *= 2 }
        return min(delay, ceiling)
    }
}
