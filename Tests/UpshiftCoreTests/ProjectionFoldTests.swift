import Foundation
import Testing
import UpshiftCore

/// The pure parts of the projections: version sort keys (the database orders versions by them), UTC days,
/// the adoption fold's −1/+1 moves, and nearest ranks.
@Suite struct ProjectionFoldTests {
    @Test func sortKeysOrderVersionsAsVersionsCompare() throws {
        for row in try VersionTests.cases().compare {
            let a = try #require(row[0].text.flatMap(Version.init))
            let b = try #require(row[1].text.flatMap(Version.init))
            let sign = try #require(row[2].sign)
            let keys = (a.sortKey, b.sortKey)
            #expect((keys.0 < keys.1 ? -1 : (keys.0 == keys.1 ? 0 : 1)) == sign, "\(a) \(keys.0) vs \(b) \(keys.1)")
        }
        // Pre-release identifiers (SemVer §11): numeric below alphanumeric, fewer identifiers lower.
        let ordered = ["1.0.0-1", "1.0.0-2", "1.0.0-10", "1.0.0-a", "1.0.0-a.1", "1.0.0-a-b", "1.0.0", "1.0.1", "1.10"]
        let versions = ordered.compactMap(Version.init)
        #expect(versions.count == ordered.count)
        #expect(versions.map(\.sortKey) == versions.map(\.sortKey).sorted())
        #expect(versions == versions.sorted())
        #expect(Version("1.4")!.normalized == "1.4.0" && Version("1.2.3.4+7")!.normalized == "1.2.3.4")
    }

    @Test func utcDaysParseFormatAndSplitAtMidnight() throws {
        let midnight = try #require(Timestamp.parse("2026-03-01T00:00:00.000Z"))
        #expect(UTCDay(midnight).description == "2026-03-01")
        #expect(UTCDay(midnight.addingTimeInterval(-0.001)).description == "2026-02-28")
        // A midnight that reads back a hair early (a Double near 1.7e9 s) is still that day.
        #expect(UTCDay(midnight.addingTimeInterval(-1e-7)).description == "2026-03-01")
        #expect(UTCDay("2024-02-29")?.description == "2024-02-29")
        #expect(UTCDay("2025-02-29") == nil && UTCDay("2025-1-01") == nil)
    }

    /// Erasing an install takes out of adoption and health exactly what the fold counted of it: of open
    /// days as their stored state says, of closed days (state pruned) from its erased events.
    @Test func forgettingAnInstallTakesOutWhatTheFoldCountedOfIt() throws {
        let start = try #require(Timestamp.parse("2026-03-01T08:00:00.000Z"))
        let (install, other) = (UUID(), UUID())
        var position: Int64 = 0
        func event(_ install: UUID, day: Int, hours: Double, _ version: String, type: String = "launched") -> ProjectionEvent {
            position += 1
            let at = start.addingTimeInterval(Double(day) * 86_400 + hours * 3600)
            return ProjectionEvent(
                feedPosition: FeedPosition(transaction: 1, position: position), id: UUID(), occurredAt: at, recordedAt: at,
                appId: "a", type: type, installId: install, platform: "ios", appVersion: version, osVersion: "17.2")
        }
        // Day 0 on 1.0 then 1.1 (in reverse occurrence order: the later wins), an exit of 1.1 on day 1, and
        // day 45 (which closes days 0 and 1); the other install shares the cells (its events come before
        // the close and after it, so that the close does not depend on the erased install).
        let mine = [
            event(install, day: 0, hours: 3, "1.1"), event(install, day: 0, hours: 1, "1.0"),
            event(install, day: 1, hours: 2, "1.1"), event(install, day: 1, hours: 3, "1.1", type: "abnormal_exit"),
            event(install, day: 45, hours: 1, "1.2"),
        ]
        let theirs = [event(other, day: 0, hours: 2, "1.1"), event(other, day: 45, hours: 2, "1.2")]
        let both = AdoptionFold.fold([theirs[0]] + mine + [theirs[1]], stored: [:], maxRecordedAt: [:])
        let without = AdoptionFold.fold(theirs, stored: [:], maxRecordedAt: [:])
        // What the fold keeps of the install: the open day's state (days 0 and 1 are closed by day 45).
        let horizon = try #require(AdoptionFold.horizon(maxRecordedAt: both.maxRecordedAt["a"]))
        let stored = both.days.filter { $0.key.installId == install && $0.key.day >= horizon }
        #expect(stored.count == 1)
        let forgotten = AdoptionFold.forget(stored: stored, erased: mine, horizons: ["a": horizon])
        // Counted with the install, less what forgetting takes out, is counted without it.
        var cells = both.cells
        for (cell, change) in forgotten.cells { cells[cell, default: 0] += change }
        #expect(cells.filter { $0.value != 0 } == without.cells)
        var health = both.health
        for (cell, change) in forgotten.health {
            let counts = health[cell] ?? HealthCounts(installs: 0, exited: 0)
            health[cell] = HealthCounts(installs: counts.installs + change.installs, exited: counts.exited + change.exited)
        }
        #expect(health.filter { $0.value != HealthCounts(installs: 0, exited: 0) } == without.health)
        #expect(forgotten.health.values.contains { $0.exited == -1 })
    }

    @Test func aLaterEventOfTheDayMovesTheInstallToItsVersion() throws {
        let day = try #require(Timestamp.parse("2026-03-01T08:00:00.000Z"))
        let install = UUID()
        func event(_ hours: Double, _ version: String, position: Int64) -> ProjectionEvent {
            ProjectionEvent(
                feedPosition: FeedPosition(transaction: 1, position: position), id: UUID(),
                occurredAt: day.addingTimeInterval(hours * 3600), recordedAt: day.addingTimeInterval(hours * 3600),
                appId: "a", type: "launched", installId: install, platform: "ios", appVersion: version)
        }
        let first = AdoptionFold.fold([event(0, "1.0", position: 1)], stored: [:], maxRecordedAt: [:])
        #expect(first.cells.values.sorted() == [1])
        // Next batch: a later event on 1.1 moves the install; an earlier (late) one on 1.0.5 does not.
        let second = AdoptionFold.fold(
            [event(2, "1.1", position: 2), event(1, "1.0.5", position: 3)], stored: first.days,
            maxRecordedAt: first.maxRecordedAt)
        let moves = Dictionary(uniqueKeysWithValues: second.cells.map { ($0.key.version, $0.value) })
        #expect(moves == ["1.0.0": -1, "1.1.0": 1])
        // An event on a day closed 31 days before the newest recorded time is not counted.
        var old = event(0, "1.0", position: 4)
        old.occurredAt = day.addingTimeInterval(-40 * 86_400)
        let closed = AdoptionFold.fold([old], stored: [:], maxRecordedAt: ["a": day])
        #expect(closed.cells.isEmpty && closed.closedDayEvents == 1)
        // Each app's horizon is its own: an event recorded a day after its day is counted for an app whose
        // newest event is that one, and not for app "a", whose newest event was recorded 39 days later.
        var late = old
        late.recordedAt = old.occurredAt.addingTimeInterval(86_400)
        var other = late
        other.appId = "b"
        let open = AdoptionFold.fold([late, other], stored: [:], maxRecordedAt: ["a": day])
        #expect(open.closedDayEvents == 1 && open.cells.keys.map(\.appId) == ["b"])
        #expect(open.maxRecordedAt == ["a": day, "b": late.recordedAt])
    }

    @Test func installStateKeepsTheChannelOfTheLatestCheck() throws {
        let day = try #require(Timestamp.parse("2026-03-01T08:00:00.000Z"))
        let (checking, silent) = (UUID(), UUID())
        func event(_ install: UUID, _ hours: Double, _ type: String, channel: String? = nil) -> ProjectionEvent {
            ProjectionEvent(
                feedPosition: FeedPosition(transaction: 1, position: 1), id: UUID(),
                occurredAt: day.addingTimeInterval(hours * 3600), recordedAt: day, appId: "a", type: type,
                installId: install, platform: "ios", appVersion: "1.0", channel: channel)
        }
        let rows = InstallStateFold.fold([
            event(checking, 1, "checked", channel: "beta"), event(checking, 0, "checked", channel: "live"),  // a late one
            event(checking, 2, "launched"), event(checking, 1, "checked", channel: "live"),  // a tie: the later wins
            event(silent, 3, "launched"),
        ]).states
        let byInstall = Dictionary(uniqueKeysWithValues: rows.map { ($0.key.installId, $0) })
        #expect(byInstall[checking]?.channel == "live" && byInstall[checking]?.checkedAt == day.addingTimeInterval(3600))
        #expect(byInstall[checking]?.lastSeen == day.addingTimeInterval(2 * 3600), "a check is activity as before")
        #expect(byInstall[silent]?.channel == nil && byInstall[silent]?.checkedAt == nil, "never checked")
    }

    @Test func nearestRanksOverTheWholeCohort() {
        #expect(ReleaseReport.rank(quantile: 0.5, cohort: 1) == 1)
        #expect(ReleaseReport.rank(quantile: 0.5, cohort: 10) == 5)
        #expect(ReleaseReport.rank(quantile: 0.9, cohort: 10) == 9)
        #expect(ReleaseReport.rank(quantile: 0.9, cohort: 11) == 10)
        #expect(ReleaseReport.rank(quantile: 0.5, cohort: 0) == nil)
    }

    @Test func postgresBindingKeepsTheMicrosecond() throws {
        let date = try #require(Timestamp.parse("2026-01-09T14:03:27.123Z"))
        #expect(Timestamp.format(date) == "2026-01-09T14:03:27.123Z")
        // What PostgresNIO sends: microseconds since 2000, truncated toward zero.
        for sample in [date, Date(timeIntervalSince1970: 0), Date(timeIntervalSince1970: 1_767_225_600.000_001)] {
            let sent = Int64(sample.forPostgres.timeIntervalSince(Date(timeIntervalSince1970: 946_684_800)) * 1_000_000)
            #expect(sent == sample.microseconds - 946_684_800_000_000, "\(sample)")
        }
    }
}
