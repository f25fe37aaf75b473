import Foundation
import Testing
import UpshiftCore

/// The rollout history the catalog store keeps, and the staleness it gives each install.
@Suite struct RolloutHistoryTests {
    static let day: TimeInterval = 86_400
    static let start = Date(timeIntervalSince1970: 1_780_000_000)

    static func release(percent: Double, paused: Bool = false, history: [RolloutStep]? = nil) -> Release {
        Release(platform: "ios", version: Version("3.0")!, releasedAt: start, rolloutPercent: percent,
                rolloutPaused: paused, rolloutHistory: history)
    }

    @Test func onlyARiseOfWhatIsAdmittedIsAStep() {
        var release = Self.release(percent: 5)
        release.recordRollout(at: Self.start, previous: nil)
        #expect(release.rolloutHistory == [RolloutStep(at: Self.start, percent: 5)])
        // Paused, lowered, resumed at a share admitted before: the buckets were admitted already.
        for (percent, paused) in [(20.0, true), (2.0, false), (5.0, false)] {
            let previous = release
            release.rolloutPercent = percent
            release.rolloutPaused = paused
            release.recordRollout(at: Self.start + Self.day, previous: previous)
        }
        #expect(release.rolloutHistory == [RolloutStep(at: Self.start, percent: 5)])
        let previous = release
        release.rolloutPercent = 50
        release.recordRollout(at: Self.start + 2 * Self.day, previous: previous)
        #expect(release.rolloutHistory?.map(\.percent) == [5, 50])
        // Written at 0% or paused, a new release has admitted nobody yet.
        for (percent, paused) in [(0.0, false), (30.0, true)] {
            var fresh = Self.release(percent: percent, paused: paused)
            fresh.recordRollout(at: Self.start, previous: nil)
            #expect(fresh.rolloutHistory == [])
        }
    }

    @Test func aReleaseWrittenBeforeTheHistoryStartsItFromItsReleaseDate() {
        let previous = Self.release(percent: 30)
        var raised = previous
        raised.rolloutPercent = 60
        raised.recordRollout(at: Self.start + 9 * Self.day, previous: previous)
        #expect(raised.rolloutHistory == [
            RolloutStep(at: Self.start, percent: 30), RolloutStep(at: Self.start + 9 * Self.day, percent: 60),
        ])
    }

    @Test func eachInstallCountsFromTheStepThatAdmittedIt() {
        let steps = [RolloutStep(at: Self.start, percent: 1), RolloutStep(at: Self.start + 2 * Self.day, percent: 50),
                     RolloutStep(at: Self.start + 5 * Self.day, percent: 100)]
        let release = Self.release(percent: 100, history: steps)
        let now = Self.start + 10.5 * Self.day
        let notifiedAtOnce = Staleness(release, policy: Policy(), appId: "app")
        var days: Set<Int> = []
        for index in 0..<400 {
            let install = UUID(uuidString: String(format: "00000000-0000-4000-8000-%012d", index))!.uuidString.lowercased()
            let bucket = Rollout.bucket(appId: "app", version: "3.0", installId: install)
            let expected = bucket < 100 ? 10 : bucket < 5_000 ? 8 : 5
            #expect(notifiedAtOnce.days(installId: install, now: now) == expected, "bucket \(bucket)")
            days.insert(expected)
            // Notified after 7 days: nobody counts from before that.
            let notifiedLater = Staleness(release, policy: Policy(notifyAfterDays: 7), appId: "app")
            #expect(notifiedLater.days(installId: install, now: now) == min(expected, 3))
        }
        #expect(days == [8, 5] || days == [10, 8, 5], "installs in the 50% and 100% steps at least")
        // Never admitted (a force to a release still at 0%): offerable from now, 0 days; a clock behind
        // the release: 0, never negative.
        let unrolled = Self.release(percent: 0, history: [])
        #expect(Staleness(unrolled, policy: Policy(), appId: "app").days(installId: UUID().uuidString.lowercased(), now: now) == 0)
        #expect(notifiedAtOnce.days(installId: UUID().uuidString.lowercased(), now: Self.start - Self.day) == 0)
    }
}
