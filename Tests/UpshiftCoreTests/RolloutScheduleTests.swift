import Foundation
import Testing
import UpshiftCore
import UpshiftWire

/// Phased rollout schedules (docs/ARCHITECTURE.md, "Rollout schedules"): which step is in force when, what a
/// pause, a halt or a hand edit does to them, and which schedules are refused, naming the step.
@Suite struct RolloutScheduleTests {
    static let start = Timestamp.parse("2026-05-01T00:00:00Z")!
    static func hours(_ value: Double) -> Date { start.addingTimeInterval(value * 3_600) }

    /// A release out before `start`, with the App Store's schedule set at `start`.
    static func scheduled(_ value: JSONValue = .string("appStore")) throws -> Release {
        let release = Release(platform: "ios", version: Version("2.0")!, releasedAt: hours(-1), rolloutPercent: 0)
        return try CatalogInput.releasePatch(.object(["rolloutSchedule": value]), to: release, now: start)
    }

    static func patch(_ release: Release, _ body: [String: JSONValue], at hour: Double) throws(FieldError) -> Release {
        try CatalogInput.releasePatch(.object(body), to: release, now: hours(hour))
    }

    @Test func theAppStoreScheduleAdvancesStepByStepAndEndsAtOneHundred() throws {
        var release = try Self.scheduled()
        #expect(release.rolloutPercent == 1)
        #expect(release.rolloutSchedule?.kind == .appStore && release.rolloutSchedule?.step == 1)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(24))
        #expect(release.advanceSchedule(now: Self.hours(23.99)) == nil, "nothing due before 24 h")
        #expect(release.rolloutPercent == 1)

        let second = release.advanceSchedule(now: Self.hours(24))
        #expect(second == CatalogEvent.ScheduleNote(step: 2, percent: 2, skipped: [], resumed: false))
        #expect(release.rolloutPercent == 2)
        var seen: [Double] = [1, 2]
        for hour in stride(from: 25.0, through: 150, by: 1) {
            if release.advanceSchedule(now: Self.hours(hour)) != nil { seen.append(release.rolloutPercent) }
        }
        #expect(seen == [1, 2, 5, 10, 20, 50, 100])
        #expect(release.rolloutSchedule == nil, "the last step ends the schedule")
        #expect(release.advanceSchedule(now: Self.hours(1_000)) == nil)
    }

    @Test func afterDowntimeOneWriteAppliesTheStepDueAndNamesTheSkippedOnes() throws {
        var release = try Self.scheduled()
        _ = release.advanceSchedule(now: Self.hours(24))
        // Down from 30 h to 100 h: steps 3 (48 h) and 4 (72 h) came due, 5 (96 h) is due now.
        let note = release.advanceSchedule(now: Self.hours(100))
        #expect(note == CatalogEvent.ScheduleNote(step: 5, percent: 20, skipped: [3, 4], resumed: false))
        #expect(release.rolloutPercent == 20)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(120))
    }

    @Test func aScheduleStartsWhenTheReleaseComesOutIfThatIsLater() throws {
        let future = Release(platform: "ios", version: Version("2.0")!, releasedAt: Self.hours(48))
        var release = try Self.patch(future, ["rolloutSchedule": .string("appStore")], at: 0)
        #expect(release.rolloutPercent == 1, "nobody was admitted yet: the schedule lowers the 100 % it had")
        #expect(release.rolloutSchedule?.startsAt == Self.hours(48))
        #expect(release.advanceSchedule(now: Self.hours(71)) == nil)
        #expect(release.advanceSchedule(now: Self.hours(72))?.step == 2)
    }

    @Test func aPauseKeepsThePercentageAndMovesEveryLaterStepBack() throws {
        var release = try Self.scheduled()
        release = try Self.patch(release, ["rolloutAction": .string("pause")], at: 10)
        #expect(release.rolloutPercent == 1 && !release.rolloutPaused, "installs admitted keep being offered")
        #expect(release.rolloutSchedule?.state == .paused)
        #expect(release.advanceSchedule(now: Self.hours(40)) == nil, "no step comes due while paused")
        release = try Self.patch(release, ["rolloutAction": .string("resume")], at: 15)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(29), "five hours paused: step 2 five hours later")
        #expect(release.advanceSchedule(now: Self.hours(28.9)) == nil)
        #expect(release.advanceSchedule(now: Self.hours(29))?.step == 2)
        #expect(abs((release.rolloutSchedule?.pausedSeconds ?? 0) - 5 * 3_600) < 0.001, "five hours counted against the 30 days")
    }

    @Test func pausesAddUpToThirtyDaysThenTheScheduleResumesByItself() throws {
        var release = try Self.scheduled()
        release = try Self.patch(release, ["rolloutAction": .string("pause")], at: 0)
        release = try Self.patch(release, ["rolloutAction": .string("resume")], at: 10 * 24)  // 10 days
        release = try Self.patch(release, ["rolloutAction": .string("pause")], at: 10 * 24 + 1)
        // 20 days of pause left: it ends by itself at 30 d 1 h. Held 30 days in all, step 2 (24 h) comes at 31 d.
        #expect(release.advanceSchedule(now: Self.hours(30 * 24)) == nil)
        let resumed = release.advanceSchedule(now: Self.hours(30 * 24 + 1))
        #expect(resumed == CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: true))
        #expect(release.rolloutSchedule?.state == .running)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(30 * 24 + 24))
        do {
            _ = try Self.patch(release, ["rolloutAction": .string("pause")], at: 30 * 24 + 2)
            Issue.record("a pause beyond 30 days in all was taken")
        } catch {
            #expect(error.field == "rolloutAction" && error.kind == .inconsistent)
        }
    }

    /// A person pauses a schedule (here with step 2 due at 24 h and not yet applied): when the pause ends by
    /// itself after 30 days while a rule would hold the release, the end of the pause becomes a hold and the
    /// due step is not applied.
    @Test func aPauseThatEndsWhileARuleHoldsBecomesAHold() throws {
        var release = try Self.scheduled()
        release = try Self.patch(release, ["rolloutAction": .string("pause")], at: 25)
        #expect(release.rolloutSchedule?.state == .paused)
        let end = 25 + 30 * 24.0
        #expect(release.holdSchedule("worse", now: Self.hours(end - 1)) == nil, "paused until its 30 days end")
        var unheld = release
        #expect(unheld.advanceSchedule(now: Self.hours(end))?.step == 2, "without a rule's hold the due step is applied")
        let note = release.holdSchedule("worse", now: Self.hours(end))
        #expect(note == CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: true, held: "worse"))
        #expect(release.rolloutSchedule?.state == .held && release.rolloutPercent == 1)
        #expect(abs((release.rolloutSchedule?.pausedSeconds ?? 0) - 30 * 86_400) < 0.001, "the pause counted in full")
    }

    @Test func aHaltOffersToNobodyAndStopsTheScheduleUntilResumed() throws {
        var release = try Self.scheduled()
        _ = release.advanceSchedule(now: Self.hours(24))
        release = try Self.patch(release, ["rolloutAction": .string("halt")], at: 30)
        #expect(release.rolloutPaused && release.rolloutSchedule?.state == .halted)
        #expect(release.advanceSchedule(now: Self.hours(60 * 24)) == nil, "a halt has no 30-day limit")
        // rolloutPaused written by hand is the same verb.
        release = try Self.patch(release, ["rolloutPaused": .bool(false)], at: 40)
        #expect(!release.rolloutPaused && release.rolloutSchedule?.state == .running)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(58), "ten hours halted")
        #expect(release.rolloutSchedule?.pausedSeconds == 0, "a halt is not counted against the pauses")
    }

    /// An advance rule's hold: only a step that is due is held; the time held moves every later step back,
    /// is not counted against the 30 days of pauses, and the step due is applied when the hold ends.
    @Test func aRuleHoldsADueStepAndItsTimeMovesTheLaterStepsBack() throws {
        var release = try Self.scheduled()
        #expect(release.holdSchedule("crash-guard: worse", now: Self.hours(10)) == nil, "step 2 is not due before 24 h")
        let held = release.holdSchedule("crash-guard: worse", now: Self.hours(25))
        #expect(held == CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: false, held: "crash-guard: worse"))
        #expect(release.rolloutSchedule?.state == .held && release.rolloutSchedule?.holdReason == "crash-guard: worse")
        #expect(release.rolloutPercent == 1, "a hold keeps the percentage")
        #expect(release.advanceSchedule(now: Self.hours(100)) == nil, "no step comes due while held")
        #expect(release.holdSchedule("again", now: Self.hours(26)) == nil, "held once")
        let released = release.releaseHold(now: Self.hours(35))
        #expect(released == CatalogEvent.ScheduleNote(step: 2, percent: 2, skipped: [], resumed: false, released: true))
        #expect(release.rolloutSchedule?.state == .running && release.rolloutSchedule?.holdReason == nil)
        #expect(release.rolloutSchedule?.next?.at == Self.hours(58), "held ten hours: step 3 (48 h) at 58 h")
        #expect(release.rolloutSchedule?.pausedSeconds == 0, "a hold is not counted against the pauses")
        #expect(release.releaseHold(now: Self.hours(40)) == nil, "nothing to release")
        // A halt while held ends the hold as a halt.
        _ = release.holdSchedule("worse", now: Self.hours(60))
        release = try Self.patch(release, ["rolloutAction": .string("halt")], at: 61)
        #expect(release.rolloutSchedule?.state == .halted && release.rolloutSchedule?.holdReason == nil)
    }

    @Test func releaseToEveryoneAHandEditAndAWithdrawalEndTheSchedule() throws {
        let release = try Self.scheduled()
        let everyone = try Self.patch(release, ["rolloutAction": .string("release")], at: 1)
        #expect(everyone.rolloutPercent == 100 && everyone.rolloutSchedule == nil)
        let byHand = try Self.patch(release, ["rolloutPercent": .number(30)], at: 1)
        #expect(byHand.rolloutPercent == 30 && byHand.rolloutSchedule == nil)
        let same = try Self.patch(release, ["rolloutPercent": .number(1), "notes": .object(["en": .array([.string("x")])])], at: 1)
        #expect(same.rolloutSchedule != nil, "sending the percentage in force changes nothing")
        let withdrawn = try Self.patch(release, ["status": .string("withdrawn")], at: 1)
        #expect(withdrawn.rolloutSchedule == nil)
        let ended = try Self.patch(release, ["rolloutSchedule": .null], at: 1)
        #expect(ended.rolloutSchedule == nil && ended.rolloutPercent == 1, "ending it keeps the percentage")
    }

    @Test func customSchedulesAreCheckedStepByStep() throws {
        var custom = try Self.scheduled(.array([scheduleStep(10, 0), scheduleStep(50, 0.5), scheduleStep(100, 2)]))
        #expect(custom.rolloutSchedule?.kind == .custom && custom.rolloutPercent == 10)
        #expect(custom.advanceSchedule(now: Self.hours(0.5))?.percent == 50)
    }

    /// A malformed schedule or step is refused as such (`400`), naming the field.
    @Test(arguments: [
        (JSONValue.string("fast"), "rolloutSchedule"),
        (.array([]), "rolloutSchedule"),
        (.array((1...21).map { scheduleStep(Double($0) * 100 / 21, Double($0 - 1)) }), "rolloutSchedule"),
        (.array([scheduleStep(0, 0), scheduleStep(100, 2)]), "rolloutSchedule[0].percent"),
        (.array([scheduleStep(10, 0), scheduleStep(100.001, 2)]), "rolloutSchedule[1].percent"),
        (.array([scheduleStep(10, 0), scheduleStep(100, 0.0001)]), "rolloutSchedule[1].afterHours"),
        (.array([scheduleStep(10, 0), scheduleStep(100, 9_000)]), "rolloutSchedule[1].afterHours"),
        (.array([.object(["percent": .number(100), "afterHours": .number(0), "when": .string("now")])]), "rolloutSchedule[0].when"),
        (.array([.string("1@0")]), "rolloutSchedule[0]"),
    ])
    func aMalformedCustomScheduleIsRefused(_ schedule: JSONValue, field: String) {
        Self.expectRefused(schedule, field: field, kind: .invalid)
    }

    /// Steps that contradict each other are refused as inconsistent (`422`), naming the step.
    @Test(arguments: [
        (JSONValue.array([scheduleStep(10, 1), scheduleStep(100, 2)]), "rolloutSchedule[0].afterHours"),
        (.array([scheduleStep(10, 0), scheduleStep(5, 2), scheduleStep(100, 3)]), "rolloutSchedule[1].percent"),
        (.array([scheduleStep(10, 0), scheduleStep(20, 0), scheduleStep(100, 3)]), "rolloutSchedule[1].afterHours"),
        (.array([scheduleStep(10, 0), scheduleStep(90, 2)]), "rolloutSchedule[1].percent"),
    ])
    func contradictoryStepsAreRefused(_ schedule: JSONValue, field: String) {
        Self.expectRefused(schedule, field: field, kind: .inconsistent)
    }

    static func expectRefused(_ schedule: JSONValue, field: String, kind: FieldError.Kind) {
        do {
            _ = try scheduled(schedule)
            Issue.record("\(schedule) was taken")
        } catch let error as FieldError {
            #expect(error.field == field && error.kind == kind, "\(schedule): \(error)")
        } catch {
            Issue.record("\(schedule): \(error)")
        }
    }

    @Test func aScheduleNeverTakesBackInstallsARolloutAdmits() throws {
        let out = Release(platform: "ios", version: Version("2.0")!, releasedAt: Self.hours(-1), rolloutPercent: 20)
        do {
            _ = try Self.patch(out, ["rolloutSchedule": .string("appStore")], at: 0)
            Issue.record("a schedule from 1 % on a release at 20 % was taken")
        } catch {
            #expect(error.field == "rolloutSchedule" && error.kind == .inconsistent)
        }
        let both = ["rolloutSchedule": JSONValue.string("appStore"), "rolloutPercent": .number(1)]
        do {
            _ = try Self.patch(out, both, at: 0)
            Issue.record("rolloutPercent beside rolloutSchedule was taken")
        } catch {
            #expect(error.field == "rolloutPercent" && error.kind == .inconsistent)
        }
        do {
            _ = try Self.patch(out, ["rolloutAction": .string("pause")], at: 0)
            Issue.record("a pause without a schedule was taken")
        } catch {
            #expect(error.field == "rolloutAction" && error.kind == .inconsistent)
        }
        // Checked alone (before the stored release is read), the same bodies are well formed.
        try CatalogInput.checkReleasePatch(.object(["rolloutAction": .string("pause")]), platform: "ios", version: Version("2.0")!, now: Self.start)
        #expect(throws: FieldError.self) {
            try CatalogInput.checkReleasePatch(.object(["rolloutAction": .string("later")]), platform: "ios", version: Version("2.0")!, now: Self.start)
        }
    }

    /// A rollout field of the wrong shape is refused as such (`400`, before the revision is compared) even
    /// when the edit also breaks a rule between fields (an action sent with a schedule), which alone is
    /// judged against the stored release (found by schemathesis, seed 424242: a stale `If-Match` then won).
    @Test(arguments: [
        (JSONValue.object(["rolloutAction": .string("resume"), "rolloutSchedule": .number(JSONNumber(-7))]), "rolloutSchedule"),
        (.object(["rolloutAction": .string("resume"), "rolloutSchedule": .array([.number(JSONNumber(5))])]), "rolloutSchedule"),
        (.object(["rolloutAction": .number(JSONNumber(1)), "rolloutPercent": .number(JSONNumber(5))]), "rolloutAction"),
    ])
    func aMalformedRolloutFieldIsRefusedBeforeAnyRuleBetweenFields(_ body: JSONValue, field: String) {
        do {
            try CatalogInput.checkReleasePatch(body, platform: "ios", version: Version("2.0")!, now: Self.start)
            Issue.record("\(body) was taken")
        } catch {
            #expect(error.kind != .inconsistent && error.field.hasPrefix(field), "\(body): \(error)")
        }
    }

    /// A schedule follows its release date: at step 1 it starts again at max(new date, now); after a later
    /// step only a move that keeps every applied step due is taken, and the schedule then starts at the
    /// new date; ending or replacing it in the same edit is taken whatever the date.
    @Test func aScheduleFollowsItsReleaseDate() throws {
        let release = try Self.scheduled()
        // Step 1, moved to 10 h from now (at 2 h): starts there; moved into the past: starts now.
        let later = try Self.patch(release, ["releasedAt": .string(Timestamp.format(Self.hours(10)))], at: 2)
        #expect(later.rolloutSchedule?.startsAt == Self.hours(10) && later.rolloutSchedule?.next?.at == Self.hours(34))
        let earlier = try Self.patch(release, ["releasedAt": .string(Timestamp.format(Self.hours(-48)))], at: 2)
        #expect(earlier.rolloutSchedule?.startsAt == Self.hours(2))
        // Step 2 applied at 24 h: two hours earlier keeps it due and moves the schedule; later does not.
        var second = release
        _ = second.advanceSchedule(now: Self.hours(24))
        let moved = try Self.patch(second, ["releasedAt": .string(Timestamp.format(Self.hours(-2)))], at: 25)
        #expect(moved.rolloutSchedule?.startsAt == Self.hours(-2) && moved.rolloutSchedule?.next?.at == Self.hours(46))
        #expect(throws: FieldError.self) { try Self.patch(second, ["releasedAt": .string(Timestamp.format(Self.hours(5)))], at: 25) }
        do {
            _ = try Self.patch(second, ["releasedAt": .string(Timestamp.format(Self.hours(5)))], at: 25)
        } catch {
            #expect(error.field == "releasedAt" && error.kind == .inconsistent)
        }
        let replaced = try Self.patch(
            second, ["releasedAt": .string(Timestamp.format(Self.hours(5))), "rolloutSchedule": .null], at: 25)
        #expect(replaced.rolloutSchedule == nil && replaced.rolloutPercent == 2)
        // A release edit that does not move the date leaves the schedule as it was.
        #expect(try Self.patch(second, ["notes": .object(["en": .array(["x"])])], at: 25).rolloutSchedule == second.rolloutSchedule)
    }
}

/// One step of a custom rollout schedule, as a request body writes it.
private func scheduleStep(_ percent: Double, _ hours: Double) -> JSONValue {
    .object(["percent": .number(JSONNumber(percent)), "afterHours": .number(JSONNumber(hours))])
}
