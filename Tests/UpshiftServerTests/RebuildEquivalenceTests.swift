import Foundation
import PostgresNIO
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftStore
import UpshiftTestSupport

/// A rebuild (the set-based backfill, and batches of another size) equals incremental processing, table
/// for table and dead letter by dead letter, for every projection, on random logs: late events (days
/// already counted, and days already closed), same-instant ties, repeats under new ids, events out of
/// time order, transactions that commit out of position order, both sides of midnight, releases added
/// and moved while installs report, abnormal exits (of the version an install runs, and of the one before),
/// and events no projection can read. The seed is printed; set
/// `UPSHIFT_TEST_SEED` to replay one.
@Suite(.tags(.timed), .serverTimeLimit) struct RebuildEquivalenceTests {
    static let seeds: [UInt64] = {
        if let text = ProcessInfo.processInfo.environment["UPSHIFT_TEST_SEED"], let seed = UInt64(text) { return [seed] }
        var system = SystemRandomNumberGenerator()
        return [system.next(), system.next()]
    }()

    @Test(arguments: seeds)
    func aRebuildEqualsIncrementalProcessingOnARandomLog(seed: UInt64) async throws {
        print("RebuildEquivalenceTests: seed \(seed) (UPSHIFT_TEST_SEED=\(seed) replays it)")
        let harness = try await Harness.make()
        // After the harness's own catalog events, which are recorded now: recorded times only move forward.
        let initial = RandomLog(seed: seed, start: harness.clock.now())
        let state = Mutex(initial)
        var configuration = harness.configuration()
        configuration.roles = [.projections]
        configuration.projections.batchSize = initial.batchSize
        configuration.projections.backfillThreshold = nil  // batches only: the rebuild is the backfill
        configuration.projections.standbyInterval = .milliseconds(100)
        configuration.projections.pollInterval = .milliseconds(50)
        try await harness.run(configuration) { (_: Server) async throws in
            // Waves of events recorded a few days apart, applied as they arrive.
            for _ in 0..<initial.waves {
                let current = state.withLock { $0 }
                let next = try await harness.sql { client in
                    var next = current
                    try await next.writeWave(on: client, app: harness.appId)
                    return next
                }
                state.withLock { $0 = next }
                try await harness.waitForProjections(timeout: .seconds(120))
            }
        }
        let log = state.withLock { $0 }
        print("RebuildEquivalenceTests: seed \(seed): \(log.written) events in \(log.waves) waves, batches of \(log.batchSize)")
        let tables = try await harness.projectionTables()
        for table in ["health_daily", "health_cohorts"] {
            #expect(tables[table]?.contains { !$0.contains("\"exited\":0") } == true, "no \(table) cell counts an abnormal exit")
        }
        try await harness.expectRebuildEqualsActiveTables(backfill: true)
        try await harness.expectRebuildEqualsActiveTables(backfill: false)
    }
}

/// A random event log, written wave by wave straight into `event_log` (so that it can hold what the
/// API refuses: events a projection dead-letters, events older than the API's window).
struct RandomLog: Sendable {
    var random: SplitMix64
    /// When the first wave is recorded; each wave is recorded later.
    var now: Date
    let waves: Int
    let batchSize: Int
    var written = 0
    private var installs: [(id: UUID, platform: String, version: Int)] = []
    private var releasesAdded = 0
    static let versions = ["1.0", "1.1.0", "1.2.0", "1.10.0", "2.0.0", "2.0.1"]

    init(seed: UInt64, start: Date) {
        random = SplitMix64(seed: seed)
        now = start
        waves = 4 + Int(random.next() % 3)
        batchSize = 5 + Int(random.next() % 150)
        for _ in 0..<(40 + Int(random.next() % 60)) {
            installs.append((UUID(), random.next() % 4 == 0 ? "android" : "ios", Int(random.next() % 3)))
        }
    }

    mutating func pick<T>(_ values: [T]) -> T { values[Int(random.next() % UInt64(values.count))] }
    mutating func chance(_ percent: UInt64) -> Bool { random.next() % 100 < percent }

    /// One wave: a release or a move of one now and then, then some hundred events in a few
    /// transactions, two of them committed out of position order.
    mutating func writeWave(on client: PostgresClient, app: AppID) async throws {
        now = now.addingTimeInterval(Double(2 + random.next() % 9) * 86_400 + Double(random.next() % 86_400))
        if releasesAdded < Self.versions.count - 1, chance(70) {
            releasesAdded += 1
            let version = Version(Self.versions[releasesAdded])!
            // Released before, at or after the catalog write.
            let releasedAt = now.addingTimeInterval(Double(Int(random.next() % 11) - 5) * 86_400)
            for platform: Platform in ["ios", "android"] {
                _ = try await CatalogStore(client: client, logger: TestEnvironment.logger).addRelease(
                    appId: app, Release(platform: platform, version: version, releasedAt: releasedAt), actor: "tests",
                    reason: nil, now: now)
            }
            if chance(40) {
                let moved = releasedAt.addingTimeInterval(Double(Int(random.next() % 5) - 2) * 86_400)
                _ = try await CatalogStore(client: client, logger: TestEnvironment.logger).updateRelease(
                    appId: app, platform: "ios", version: version, expectedRevision: 1, actor: "tests", reason: nil, now: now
                ) { release in
                    var release = release
                    release.releasedAt = moved
                    return release
                }
            }
        }
        // The months the wave's events fall in (up to 35 days late), beyond what the server keeps.
        try await client.query(
            "SELECT upshift_ensure_event_partitions(\(now.addingTimeInterval(-36 * 86_400)), \(now))",
            logger: TestEnvironment.logger)
        var rows: [EventRow] = []
        for _ in 0..<(80 + Int(random.next() % 160)) { rows.append(contentsOf: nextEvents()) }
        // Out of time order within the wave, as devices deliver.
        for index in rows.indices.reversed() where index > 0 {
            rows.swapAt(index, Int(random.next() % UInt64(index + 1)))
        }
        written += rows.count
        let cut = rows.count / 3
        // The first transaction takes the lower positions and commits after the second.
        let first = Array(rows[..<cut]), second = Array(rows[cut...])
        try await client.withConnection { outer in
            try await outer.query("BEGIN", logger: TestEnvironment.logger)
            try await Self.insert(first, on: outer)
            try await client.withConnection { inner in try await Self.insert(second, on: inner) }
            try await outer.query("COMMIT", logger: TestEnvironment.logger)
        }
    }

    struct EventRow: Sendable {
        var id = UUID()
        var occurredAt: Date
        var recordedAt: Date
        var type: String
        var install: UUID
        var platform: String
        var appVersion: String
        var data: String
    }

    /// An install's next event(s): mostly launches and checks, prompts and their answers, updates; now
    /// and then a late one, a tie, a repeat under another id, or one a projection cannot read.
    mutating func nextEvents() -> [EventRow] {
        let index = Int(random.next() % UInt64(installs.count))
        var install = installs[index]
        let available = min(releasesAdded, Self.versions.count - 1)
        // Mostly recent; a fifth up to 35 days late (some of them on days adoption has closed).
        let age = chance(20) ? Double(random.next() % (35 * 86_400)) : Double(random.next() % (3 * 86_400))
        var at = now.addingTimeInterval(-age)
        if chance(10) {  // the last or first millisecond of a day
            let midnight = (at.timeIntervalSince1970 / 86_400).rounded(.down) * 86_400
            at = Date(timeIntervalSince1970: midnight + (chance(50) ? -0.001 : 0))
        }
        let version = Self.versions[install.version]
        func row(_ type: String, _ data: [String: String] = [:], version: String? = nil) -> EventRow {
            let json = data.isEmpty ? "{}" : "{" + data.sorted { $0.key < $1.key }.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",") + "}"
            return EventRow(
                occurredAt: at, recordedAt: now, type: type, install: install.id, platform: install.platform,
                appVersion: version ?? Self.versions[install.version], data: json)
        }
        var events: [EventRow]
        switch random.next() % 13 {
        case 0, 1, 2: events = [row("launched", ["osVersion": pick(["16.4", "17.1", "14"]), "locale": pick(["en", "de-AT"])])]
        case 3, 4:
            // The channel asked for (install_state keeps the latest check's); checks recorded before the
            // channel was have none, and count as live.
            var data = ["action": "none", "reason": "up_to_date"]
            if !chance(20) { data["channel"] = pick(["live", "beta"]) }
            events = [row("checked", data)]
        case 5, 6:
            let target = Self.versions[min(install.version + 1, Self.versions.count - 1)]
            let kind = pick(["soft", "force"])
            events = [row("prompt_shown", ["promptKind": kind, "targetVersion": target])]
            switch random.next() % 4 {
            case 0: events.append(row("prompt_dismissed", ["promptKind": kind, "targetVersion": target, "dismissAction": pick(["later", "skip"])]))
            case 1: events.append(row("update_started", ["promptKind": kind, "targetVersion": target]))
            case 2: events.append(row("blocked", ["targetVersion": target]))
            default: break
            }
        case 7, 8, 9:
            if install.version < max(available, 1) {
                let from = version
                install.version += 1
                installs[index] = install
                events = [row("updated", ["fromVersion": from])]
            } else {
                events = [row("launched")]
            }
        case 10:  // a tie: two versions at the same instant, the later in the feed wins
            events = [row("launched"), row("launched", version: Self.versions[(install.version + 1) % Self.versions.count])]
        case 11:  // an abnormal exit of this version or the one before, then a launch of this one
            let exited = chance(70) ? version : Self.versions[max(install.version - 1, 0)]
            events = [
                row("abnormal_exit", ["osVersion": pick(["16.4", "17.1", "17.2", ""])], version: exited),
                row("launched", ["osVersion": pick(["17.1", "18"])]),
            ]
        default:  // events no projection can read, or can read only in part
            events = [
                pick([
                    row("launched", version: "1..2"), row("prompt_shown", ["promptKind": "soft", "targetVersion": "v2"]),
                    row("prompt_shown", ["promptKind": "sometimes", "targetVersion": "2.0.0"]),
                    row("prompt_dismissed", ["promptKind": "soft", "targetVersion": "2.0.0", "dismissAction": "never"]),
                    EventRow(occurredAt: at, recordedAt: now, type: "launched", install: install.id, platform: "", appVersion: version, data: "{}"),
                ])
            ]
        }
        if chance(5), let last = events.last {  // the same event again under a new id
            var again = last
            again.id = UUID()
            events.append(again)
        }
        return events
    }

    static func insert(_ rows: [EventRow], on connection: PostgresConnection) async throws {
        guard !rows.isEmpty else { return }
        try await connection.query(
            """
            INSERT INTO event_log (event_id, occurred_at, recorded_at, app_id, type, install_id, platform, app_version, data)
            SELECT id, occurred_at, recorded_at, 'expenses', type, install, platform, version, data::jsonb
            FROM unnest(\(rows.map(\.id))::uuid[], \(rows.map(\.occurredAt))::timestamptz[], \(rows.map(\.recordedAt))::timestamptz[],
                        \(rows.map(\.type))::text[], \(rows.map(\.install))::uuid[], \(rows.map(\.platform))::text[],
                        \(rows.map(\.appVersion))::text[], \(rows.map(\.data))::text[])
                 AS r(id, occurred_at, recorded_at, type, install, platform, version, data)
            """, logger: TestEnvironment.logger)
    }
}
