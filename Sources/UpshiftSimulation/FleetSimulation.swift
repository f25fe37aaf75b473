import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import UpshiftClient
import UpshiftCore
import UpshiftServer
import UpshiftStore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// `upshift simulate` and `upshift demo`: a fleet of installs driven through the Swift SDK against the
/// Upshift application started in-process on loopback, on a clock the simulation moves. Every request
/// passes a recording transport, which is the simulation's ground truth: the events the server accepted,
/// and the checks it answered (each stored as a `checked` event).
public struct FleetSimulation {
    public struct Options: Sendable {
        public var installs: Int
        public var days: Int
        public var seed: UInt64
        public var appId: AppID
        /// The end of the simulated period (its last day ends here).
        public var end: Date
        public var progress: Bool
        /// False when the app exists already (an empty `demo` made by `scripts/run`).
        public var createApp = true
        public var appName = "Simulated fleet"
        /// The `phased` scenario: release 1.2 rolls out on the App Store's schedule while the fleet runs.
        public var phased = false

        public init(installs: Int, days: Int, seed: UInt64, appId: AppID, end: Date, progress: Bool) {
            self.installs = installs
            self.days = days
            self.seed = seed
            self.appId = appId
            self.end = end
            self.progress = progress
        }
    }

    let options: Options
    let configuration: AppConfiguration
    let clock: SimulatedClock
    let logger: Logger

    public init(options: Options, configuration base: AppConfiguration, logger: Logger) {
        var options = options
        // Whole seconds: events travel with millisecond timestamps, checks are stored at the server's
        // clock; the same instant must read the same on both paths.
        options.end = Date(timeIntervalSince1970: options.end.timeIntervalSince1970.rounded(.down))
        self.options = options
        self.logger = logger
        let start = options.end.addingTimeInterval(-Double(options.days) * 86_400)
        clock = SimulatedClock(start.addingTimeInterval(-30 * 86_400))
        var configuration = base
        configuration.clock = clock
        configuration.host = "127.0.0.1"
        configuration.port = FreePort.find()
        // One loopback address and one key speak for the whole fleet, and one token for its team (the health
        // scenario reads its releases after every evaluation), faster than real time.
        configuration.check.ratePerClient.rate = 0
        configuration.readers.ratePerToken.rate = 0
        configuration.ingestion.ratePerClient.rate = 0
        configuration.ingestion.ratePerKey.rate = 0
        // A loaded machine can stall a commit for seconds; a flush given up at the server's 3 s would
        // drop the check observations it carried (and refuse more for a moment), and the reports could
        // not equal the ground truth. The simulation compares reports, not deadlines (those have tests
        // of their own), so the hot path waits longer here.
        configuration.ingestion.flushTimeout = .seconds(30)
        configuration.pools.waitTimeout = .seconds(30)
        configuration.pools.answerTimeout = .seconds(30)
        configuration.logLevel = .error
        self.configuration = configuration
    }

    /// Launches of a day fall between this hour and 23:00 of it (hours from the day's start).
    static let firstLaunchHour = 8

    var start: Date { options.end.addingTimeInterval(-Double(options.days) * 86_400) }
    var baseURL: URL { URL(string: "http://127.0.0.1:\(configuration.port)")! }

    public struct Result: Sendable {
        /// Rows the server stored for the fleet: events and answered checks.
        public var stored: Int
        /// Time-to-update of the releases of the period, by the ground truth.
        public var summary: String
        /// Where a report differs from the ground truth, one line each.
        public var differences: [String]
        /// The keys the simulation made for its app.
        public var readKey: String
        public var adminKey: String
    }

    /// Runs the fleet; returns the ground truth and the server's reports, compared.
    public func run() async throws -> Result {
        try await serving(drive(keys:))
    }

    /// Makes the app and its keys, starts the application in-process, runs `body` against it, and stops it.
    func serving<T>(_ body: (Keys) async throws -> T) async throws -> T {
        try await checkTheLogLeavesThePeriodOpen()
        // Keys before the server: it loads every key as it starts (later ones take up to a second).
        let keys = try await createApp()
        let app = try await buildApplication(configuration, logger: logger)
        // Stopped gracefully at the end (cancelling it would log the open connections as errors).
        let group = ServiceGroup(configuration: .init(services: [app], logger: logger))
        let server = Task { try await group.run() }
        do {
            let result = try await body(keys)
            await group.triggerGracefulShutdown()
            try await server.value
            return result
        } catch {
            server.cancel()
            throw error
        }
    }

    typealias Keys = (ingest: String, read: String, admin: String)

    /// The fleet against the running server.
    private func drive(keys: Keys) async throws -> Result {
        let http = HTTP(baseURL: baseURL)
        try await http.waitUntilReady()

        let recorder = RecordingTransport(clock: clock)
        var random = SplitMix64(seed: options.seed)
        let plan = ReleasePlan(start: start, days: options.days, phased: options.phased)
        var schedule = ScheduleWatch(
            release: plan.releases.first { $0.phased }, app: options.appId, key: keys.admin, database: configuration.database,
            operatorToken: configuration.operatorToken, logger: logger)
        for release in plan.releases where release.at < start {
            clock.set(release.at)
            try await http.admin(.POST, "/v1/apps/\(options.appId)/releases", key: keys.admin, body: release.body)
        }
        clock.set(start)
        try await http.admin(
            .PUT, "/v1/apps/\(options.appId)/policies/ios", key: keys.admin,
            body: plan.policy(minimum: false), ifMatch: 0)

        // The installs' SDK files live in memory where the system offers it: thousands of small atomic
        // writes a minute cost a disk file system most of the run (new inodes for every rename).
        let memory = URL(fileURLWithPath: "/dev/shm", isDirectory: true)
        let scratch = FileManager.default.isWritableFile(atPath: memory.path) ? memory : FileManager.default.temporaryDirectory
        let folder = scratch.appendingPathComponent("upshift-simulate-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: folder) }
        var fleet = (0..<options.installs).map { index in
            SimulatedInstall(index: index, random: &random)
        }
        let progress = ProgressLine(enabled: options.progress, days: options.days)
        var prediction: Prediction?
        for day in 0..<options.days {
            let dayStart = start.addingTimeInterval(Double(day) * 86_400)
            // The team's actions of the day, at 08:00, before the first launch can happen; each release of the
            // day at its own time, when the launches reach it. The clock never goes back, so anything that set it
            // ahead of the launches would pin every launch before that time to one instant: an install that
            // started an update and opened the new version minutes later would record both launches at once,
            // and the order the server stored them in (a check's observation is written in the background)
            // would decide adoption's ties instead of the order they happened in.
            let firstLaunch = dayStart.addingTimeInterval(Double(Self.firstLaunchHour * 3_600))
            clock.set(firstLaunch)
            var unpublished = plan.releases.filter { $0.day == day }.sorted { $0.at < $1.at }
            func publish(through time: Date) async throws {
                while let release = unpublished.first, release.at <= time {
                    unpublished.removeFirst()
                    clock.set(release.at)
                    try await http.admin(.POST, "/v1/apps/\(options.appId)/releases", key: keys.admin, body: release.body)
                }
            }
            try await publish(through: firstLaunch)
            if day == plan.minimumRaiseDay {
                // Before the raise, the backtest of it: what it predicts is checked against the fleet's own facts.
                try await waitForStoredEvents(expected: recorder.storedCount, http: http)
                let report = try await http.post(
                    "/v1/apps/\(options.appId)/preview?platform=ios&window=\(Prediction.windowDays)", key: keys.read,
                    body: .object(["policy": plan.policy(minimum: true)]))
                prediction = Prediction(
                    report: report, facts: recorder.facts, now: clock.now(), minimum: plan.minimumVersion)
                try await http.admin(
                    .PUT, "/v1/apps/\(options.appId)/policies/ios", key: keys.admin,
                    body: plan.policy(minimum: true), ifMatch: 1)
            }
            // Launches in time order across the fleet, those of each 30 minutes at once (one per install),
            // on the clock of the slot's first launch. A user who started an update opens the new version
            // minutes later. Each launch has its own random sequence, so the order of work does not matter.
            var pending: [(at: Date, install: Int)] = []
            for index in fleet.indices where random.chance(fleet[index].habits.launchProbability) {
                pending.append((dayStart.addingTimeInterval(Double(random.int(Self.firstLaunchHour * 3_600...23 * 3_600))), index))
            }
            var launchNumber = 0
            while !pending.isEmpty {
                pending.sort { ($0.at, $0.install) < ($1.at, $1.install) }
                let slotStart = pending[0].at
                let slotEnd = slotStart.addingTimeInterval(1_800)
                var slot: [(at: Date, install: Int)] = []
                var taken = Set<Int>()
                pending.removeAll { launch in
                    guard launch.at < slotEnd, taken.insert(launch.install).inserted else { return false }
                    slot.append(launch)
                    return true
                }
                try await publish(through: slotStart)
                clock.set(slotStart)
                try await schedule.awaitStep(at: slotStart, http: http)
                let available = plan.releases.filter { $0.at <= slotStart }
                let results = await withTaskGroup(of: (Int, SimulatedInstall, Bool).self) { group in
                    for launch in slot {
                        launchNumber += 1
                        var install = fleet[launch.install]
                        let online = !install.habits.offline || day % install.habits.deliveryEveryDays == 0
                        var random = SplitMix64(seed: options.seed &* 1_000_003 &+ UInt64(day) &* 7_919 &+ UInt64(launchNumber))
                        let base = sdkConfiguration(for: install, folder: folder, key: keys.ingest, transport: recorder)
                        group.addTask {
                            let startedUpdate = await install.launch(
                                configuration: { version in
                                    var configuration = base
                                    configuration.appVersion = version
                                    return configuration
                                }, releases: available, online: online, random: &random)
                            return (launch.install, install, startedUpdate)
                        }
                    }
                    var results: [(Int, SimulatedInstall, Bool)] = []
                    for await result in group { results.append(result) }
                    return results
                }
                for (index, install, startedUpdate) in results {
                    fleet[index] = install
                    if startedUpdate {
                        let delay = Double(300 + (index * 37 + day * 101) % 1_500)  // 5 to 30 minutes
                        pending.append((slotEnd.addingTimeInterval(delay), index))
                    }
                }
            }
            try await publish(through: .distantFuture)
            progress.update(day: day + 1, events: recorder.acceptedCount)
        }
        // Everything still queued reaches the server at the end of the period.
        clock.set(options.end)
        // A batch the server stored but answered late (a 503 after its flush timeout) stays queued: send it
        // again until the server has acknowledged it (as a duplicate), or the ground truth would miss it.
        for install in fleet where install.launched {
            let sdk = Upshift(
                configuration: sdkConfiguration(for: install, folder: folder, key: keys.ingest, transport: recorder))
            for _ in 0..<30 {
                await sdk.flush()
                if await sdk.pendingEvents == 0 { break }
                try await Task.sleep(for: .milliseconds(500))
            }
            guard await sdk.pendingEvents == 0 else {
                throw HTTP.Failure(description: "install \(install.index) still has \(await sdk.pendingEvents) events queued after 30 attempts")
            }
        }
        progress.finish(events: recorder.acceptedCount)

        try await waitForStoredEvents(expected: recorder.storedCount, http: http)
        let truth = GroundTruth(facts: recorder.facts, releases: plan.releases, start: start, end: options.end)
        var differences = try await truth.compare(with: http, app: options.appId, key: keys.read)
        var summary = truth.summary(app: options.appId)
        if let prediction {
            differences += prediction.differences
            summary += "; \(prediction.summary)"
        }
        if let slowest = schedule.slowest {
            summary += "; each step was served by the check within \(Int(slowest / .milliseconds(1))) ms of the clock passing it"
        }
        return Result(
            stored: recorder.storedCount, summary: summary, differences: differences, readKey: keys.read,
            adminKey: keys.admin)
    }

    /// The phased release's steps as the server writes them: before the fleet launches at a moment a step
    /// is due, the rollout worker of the server (reading the simulated clock) must have written it and the
    /// check's snapshot must hold it (`upshift_catalog_version`), so that the step in force at every check
    /// is the schedule's.
    struct ScheduleWatch {
        let release: PlannedRelease?
        let app: AppID
        let key: String
        let database: DatabaseSettings
        let operatorToken: String?
        let logger: Logger
        var confirmed: Double = 0
        /// The longest a step took to reach the catalog after the clock passed it.
        var slowest: Duration?

        mutating func awaitStep(at date: Date, http: HTTP) async throws {
            guard let release, date >= release.at else { return }
            let due = release.percent(at: date)
            guard due > confirmed else { return }
            let started = ContinuousClock.now
            while true {
                let current = try await http.get("/v1/apps/\(app)/releases/ios/\(release.version)", key: key)
                if current["rolloutPercent"]?.doubleValue == due { break }
                guard ContinuousClock.now - started < .seconds(3) else {
                    throw HTTP.Failure(
                        description: "the rollout worker did not write \(release.version)'s \(due)% step within 3 s "
                            + "(the catalog says \(current["rolloutPercent"]?.doubleValue ?? -1)%)")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            // Written is not yet served: the check answers from the snapshot, which the write reloads next.
            let (settings, logger) = (database, self.logger)
            let written = try await Database.withPool(settings, logger: logger) { pool, logger in
                try await CatalogStore(pool: pool, logger: logger).version()
            }
            while try await http.metric("upshift_catalog_version", token: operatorToken) ?? -1 < Double(written) {
                guard ContinuousClock.now - started < .seconds(3) else {
                    throw HTTP.Failure(description: "the check's snapshot did not reach catalog version \(written) within 3 s")
                }
                try await Task.sleep(for: .milliseconds(20))
            }
            slowest = max(slowest ?? .zero, ContinuousClock.now - started)
            confirmed = due
        }
    }

    private func sdkConfiguration(
        for install: SimulatedInstall, folder: URL, key: String, transport: RecordingTransport
    ) -> UpshiftConfiguration {
        var configuration = UpshiftConfiguration(
            appId: options.appId.rawValue, platform: "ios", ingestKey: key, baseURL: baseURL,
            storageDirectory: folder.appendingPathComponent("install-\(install.index)"), appVersion: install.version,
            osVersion: install.habits.osVersion, locale: install.habits.locale)
        configuration.clock = clock
        configuration.transport = transport
        configuration.checkTimeout = .seconds(60)  // a check the server answered late is still one it stored
        configuration.log = { _ in }
        configuration.sendFromDebugBuilds = true  // simulated users, whichever build runs them
        return configuration
    }

    /// The adoption projection closes a day of an app once the feed holds an event of the app recorded 32
    /// days after it (docs/ARCHITECTURE.md, "Determinism": events are accepted up to 30 days late). An
    /// app whose events already reach now (a second run on the same app) would have the first days of a
    /// longer period closed before the simulation reaches them: refuse, saying so, rather than report
    /// differences. Other apps' events close none of its days.
    private func checkTheLogLeavesThePeriodOpen() async throws {
        let (settings, start, app) = (configuration.database, start, options.appId)
        let latest = try await Database.withPool(settings, logger: logger) { pool, logger in
            try await EventLog(pool: pool, logger: logger).latestRecordedAt(app: app)
        }
        guard let latest, UTCDay(start) < UTCDay(latest).adding(days: -AdoptionFold.openDays) else { return }
        let days = max(0, Int(options.end.timeIntervalSince(latest.addingTimeInterval(-Double(AdoptionFold.openDays) * 86_400)) / 86_400) - 1)
        throw HTTP.Failure(
            description: """
                this database's event log already holds events of \(app) recorded up to \(Timestamp.format(latest)); the \
                adoption projection has closed every day of it before \(UTCDay(latest).adding(days: -AdoptionFold.openDays)), so the first \
                days of a \(options.days)-day period ending now would not be counted. Use a fresh database, or --days \(days) or fewer.
                """)
    }

    private func createApp() async throws -> Keys {
        let settings = configuration.database
        let (app, name, now, end, create) = (options.appId, options.appName, clock.now(), options.end, options.createApp)
        let suffix = String(UInt32.random(in: 0...UInt32.max), radix: 16)
        return try await Database.withPool(settings, logger: logger) { pool, logger in
            if create {
                _ = try await CatalogStore(pool: pool, logger: logger).createApp(
                    AppInfo(id: app, name: name, updateURL: ["ios": "https://apps.apple.com/app/id1"]),
                    actor: "simulate", reason: "upshift simulate", now: now)
            }
            let keys = KeyStore(pool: pool, logger: logger)
            // Partitions for the whole period (the server creates them around its clock's start only).
            let log = EventLog(pool: pool, logger: logger)
            for date in stride(from: now.timeIntervalSince1970, through: end.timeIntervalSince1970 + 86_400, by: 20 * 86_400) {
                _ = try await log.ensurePartitions(now: Date(timeIntervalSince1970: date))
            }
            let ingest = try await keys.create(name: "\(app)-simulate-ingest-\(suffix)", scope: .ingest, appId: app, now: now).1
            let read = try await keys.create(name: "\(app)-simulate-read-\(suffix)", scope: .read, appId: app, now: now).1
            let admin = try await keys.create(name: "\(app)-simulate-admin-\(suffix)", scope: .admin, appId: app, now: now).1
            return (ingest, read, admin)
        }
    }
}
