import Foundation

/// A staged rollout that advances by itself: steps of (percent, hours after the start), applied by the
/// rollout worker as catalog writes (actor and reason `schedule`). It starts at the later of the
/// release's `releasedAt` and the moment it was set; time spent paused or halted moves every later
/// step back by as much, as the App Store's phased release does.
public struct RolloutSchedule: Sendable, Equatable, Codable {
    public enum Kind: String, Sendable, Codable {
        /// The App Store's phased release: 1, 2, 5, 10, 20, 50 and 100 % at 0, 24, … 144 hours.
        case appStore
        case custom
    }

    public enum State: String, Sendable, Codable {
        /// Steps come due.
        case running
        /// The percentage stays; no step comes due; resumes by itself once pauses add up to 30 days.
        case paused
        /// The release's `rolloutPaused`: offered to nobody, no step comes due, until resumed.
        case halted
        /// An `advance` rule holds it while the release's health or prompt signals are outside a rule's
        /// thresholds (``holdReason``): no step comes due; the time held moves later steps back and is not
        /// counted against ``maximumPause``.
        case held
    }

    public struct Step: Sendable, Equatable, Codable {
        public var percent: Double
        public var afterHours: Double

        public init(percent: Double, afterHours: Double) {
            self.percent = percent
            self.afterHours = afterHours
        }
    }

    public var kind: Kind
    public var steps: [Step]
    public var startsAt: Date
    public var state: State
    /// The number of the step in force, 1 for the first.
    public var step: Int
    /// Seconds spent paused or halted before the current pause or halt: every later step is that much later.
    public var heldSeconds: Double
    /// Seconds spent paused (not halted), counted against ``maximumPause``.
    public var pausedSeconds: Double
    /// When the current pause, halt or hold began (nil while running).
    public var since: Date?
    /// While held: why, as the rule that holds it said.
    public var holdReason: String?

    /// At most this long paused in all; then the schedule resumes by itself.
    public static let maximumPause: TimeInterval = 30 * 86_400
    public static let maximumSteps = 20
    public static let maximumHours = 8_760
    public static let hourPlaces = 3
    public static let appStoreSteps: [Step] = [(1, 0), (2, 24), (5, 48), (10, 72), (20, 96), (50, 120), (100, 144)]
        .map { Step(percent: $0.0, afterHours: $0.1) }

    public init(kind: Kind, steps: [Step], startsAt: Date, state: State = .running, since: Date? = nil) {
        self.kind = kind
        self.steps = steps
        self.startsAt = startsAt
        self.state = state
        self.step = 1
        self.heldSeconds = 0
        self.pausedSeconds = 0
        self.since = since
    }

    /// When step `number` (1-based) comes due, as things stand: nil while paused or halted.
    public func dueAt(step number: Int) -> Date? {
        guard state == .running, steps.indices.contains(number - 1) else { return nil }
        return startsAt.addingTimeInterval(steps[number - 1].afterHours * 3_600 + heldSeconds)
    }

    /// The next step and when it comes due (nil after the last, or while paused or halted).
    public var next: (number: Int, step: Step, at: Date)? {
        guard let at = dueAt(step: step + 1) else { return nil }
        return (step + 1, steps[step], at)
    }

    /// While paused, when the pause ends by itself.
    public var resumesAt: Date? {
        guard state == .paused, let since else { return nil }
        return since.addingTimeInterval(max(0, Self.maximumPause - pausedSeconds))
    }

    /// Ends the current pause or halt at `end`, adding it to the time held (and paused).
    mutating func closeHold(at end: Date) {
        guard let since, state != .running else { return }
        let held = max(0, end.timeIntervalSince(since))
        heldSeconds += held
        if state == .paused { pausedSeconds = min(Self.maximumPause, pausedSeconds + held) }
        self.since = nil
        holdReason = nil
        state = .running
    }

    /// The steps of a `rolloutSchedule` field: `"appStore"`, or a list of `{percent, afterHours}` with
    /// percents strictly increasing from above 0 to 100 and hours strictly increasing from 0. A malformed
    /// step is `invalid` (400); steps that contradict each other are `inconsistent` (422), as a minimum
    /// OS above the maximum is.
    public static func parse(_ value: JSONValue, field: String = "rolloutSchedule") throws(FieldError) -> (Kind, [Step]) {
        if let name = value.stringValue {
            guard name == Kind.appStore.rawValue else {
                throw FieldError(field, "must be \"appStore\" or a list of {percent, afterHours} steps")
            }
            return (.appStore, appStoreSteps)
        }
        guard case .array(let items) = value else {
            throw FieldError(field, "must be \"appStore\" or a list of {percent, afterHours} steps")
        }
        guard (1...maximumSteps).contains(items.count) else { throw FieldError(field, "1 to \(maximumSteps) steps") }
        var steps: [Step] = []
        for (index, item) in items.enumerated() {
            do throws(FieldError) {
                let step = try CatalogInput.Fields(item, allowed: ["percent", "afterHours"])
                guard let percent = try step.decimal("percent", in: 0...100, places: CatalogInput.rolloutPercentPlaces) else {
                    throw FieldError("percent", "is required")
                }
                guard percent > 0 else { throw FieldError("percent", "must be above 0") }
                guard let hours = try step.decimal("afterHours", in: 0...maximumHours, places: hourPlaces) else {
                    throw FieldError("afterHours", "is required")
                }
                steps.append(Step(percent: percent, afterHours: hours))
            } catch {
                throw error.inside("\(field)[\(index)]")
            }
        }
        // Each step is well formed (400 above); steps that contradict each other are 422, naming the step.
        for (index, step) in steps.enumerated() {
            let name = "\(field)[\(index)]"
            guard index > 0 else {
                guard step.afterHours == 0 else {
                    throw FieldError("\(name).afterHours", "the first step is at the start: 0", kind: .inconsistent)
                }
                continue
            }
            let previous = steps[index - 1]
            guard step.percent > previous.percent else {
                throw FieldError(
                    "\(name).percent", "must be above the step before (\(previous.percent.formatted())%)", kind: .inconsistent)
            }
            guard step.afterHours > previous.afterHours else {
                throw FieldError(
                    "\(name).afterHours", "must be after the step before (\(previous.afterHours.formatted()) h)", kind: .inconsistent)
            }
        }
        guard steps.last?.percent == 100 else {
            throw FieldError("\(field)[\(steps.count - 1)].percent", "the last step is 100", kind: .inconsistent)
        }
        return (.custom, steps)
    }
}

/// What a rollout owner can do to a release's rollout (`rolloutAction`).
public enum RolloutAction: String, Sendable, CaseIterable {
    /// The schedule stops where it is; installs already admitted keep being offered.
    case pause
    /// Undo a pause or a halt.
    case resume
    /// `rolloutPaused`: offered to nobody until resumed; the schedule stops too.
    case halt
    /// 100 % now; the schedule ends.
    case release
}

extension CatalogEvent {
    /// What the rollout worker did in one write: the step it applied (1-based) and the steps that came
    /// due meanwhile (after downtime) and were skipped, or the end of a pause that reached 30 days.
    public struct ScheduleNote: Sendable, Equatable, Codable {
        public var step: Int?
        public var percent: Double?
        public var skipped: [Int]
        public var resumed: Bool
        /// On an edit of `releasedAt`: where the schedule now starts (``Release/followReleaseDate(from:now:)``).
        public var reanchoredAt: Date?
        /// A step came due and a rule held it: why (``Release/holdSchedule(_:now:)``).
        public var held: String?
        /// A rule's hold ended: the signals are back within its thresholds.
        public var released: Bool?

        public init(
            step: Int?, percent: Double?, skipped: [Int], resumed: Bool, reanchoredAt: Date? = nil, held: String? = nil,
            released: Bool? = nil
        ) {
            self.step = step
            self.percent = percent
            self.skipped = skipped
            self.resumed = resumed
            self.reanchoredAt = reanchoredAt
            self.held = held
            self.released = released
        }
    }

    /// The actor and the reason of the worker's writes.
    public static let scheduleActor = "schedule"
}

extension Release {
    /// Starts `steps` as this release's schedule, set at `now`: its first step applies at once.
    /// `previous` is the release before the write (nil when new): a schedule never takes back installs
    /// a released rollout already admits.
    public mutating func startSchedule(_ kind: RolloutSchedule.Kind, _ steps: [RolloutSchedule.Step], now: Date, previous: Release?)
        throws(FieldError)
    {
        guard status == .live else {
            throw FieldError("rolloutSchedule", "a withdrawn release is offered to nobody: nothing to roll out", kind: .inconsistent)
        }
        if let previous, previous.status == .live, !previous.rolloutPaused, previous.releasedAt <= now,
            previous.rolloutPercent > steps[0].percent
        {
            throw FieldError(
                "rolloutSchedule",
                "starts at \(steps[0].percent.formatted())% but the release already admits \(previous.rolloutPercent.formatted())%: "
                    + "a schedule never takes an offer back", kind: .inconsistent)
        }
        rolloutPercent = steps[0].percent
        let schedule = RolloutSchedule(
            kind: kind, steps: steps, startsAt: max(releasedAt, now), state: rolloutPaused ? .halted : .running,
            since: rolloutPaused ? now : nil)
        rolloutSchedule = steps.count > 1 ? schedule : nil
    }

    /// Applies a rollout owner's `action` at `now`.
    public mutating func perform(_ action: RolloutAction, now: Date) throws(FieldError) {
        switch action {
        case .pause:
            guard var schedule = rolloutSchedule, schedule.state == .running else {
                throw FieldError("rolloutAction", "pause stops a running schedule, and this release has none", kind: .inconsistent)
            }
            guard schedule.pausedSeconds < RolloutSchedule.maximumPause else {
                throw FieldError("rolloutAction", "this schedule has been paused for 30 days in all: no pause is left", kind: .inconsistent)
            }
            schedule.state = .paused
            schedule.since = now
            rolloutSchedule = schedule
        case .resume:
            guard rolloutPaused || (rolloutSchedule.map { $0.state != .running } ?? false) else {
                throw FieldError("rolloutAction", "nothing to resume: the rollout is neither paused nor halted", kind: .inconsistent)
            }
            rolloutPaused = false
            if var schedule = rolloutSchedule {
                schedule.closeHold(at: schedule.resumesAt.map { min($0, now) } ?? now)
                rolloutSchedule = schedule
            }
        case .halt:
            rolloutPaused = true
            if var schedule = rolloutSchedule, schedule.state != .halted {
                schedule.closeHold(at: schedule.resumesAt.map { min($0, now) } ?? now)
                schedule.state = .halted
                schedule.since = now
                rolloutSchedule = schedule
            }
        case .release:
            rolloutPercent = 100
            rolloutPaused = false
            rolloutSchedule = nil
        }
    }

    /// Keeps the schedule true to a hand edit from `old`: a change of `rolloutPercent` or a withdrawal
    /// ends it, a change of `rolloutPaused` halts or resumes it.
    public mutating func reconcileSchedule(with old: Release, now: Date) throws(FieldError) {
        guard rolloutSchedule != nil else { return }
        if rolloutPaused != old.rolloutPaused {
            let halt = rolloutPaused
            rolloutPaused = old.rolloutPaused
            try perform(halt ? .halt : .resume, now: now)
        }
        if rolloutPercent != old.rolloutPercent || status == .withdrawn { rolloutSchedule = nil }
    }

    /// Keeps the schedule with its release when an edit moves `releasedAt` (from `old`'s) at `now`. While
    /// only step 1 is applied, the schedule starts again at max(new `releasedAt`, `now`); held time and the
    /// pause budget carry over. After a later step it follows the new date only if every applied step
    /// stays due (`422` naming `releasedAt` otherwise: end or replace the schedule in the same edit).
    public mutating func followReleaseDate(from old: Release, now: Date) throws(FieldError) {
        guard releasedAt != old.releasedAt, var schedule = rolloutSchedule else { return }
        if schedule.step == 1 {
            schedule.startsAt = max(releasedAt, now)
        } else {
            let applied = schedule.steps[schedule.step - 1]
            let due = releasedAt.addingTimeInterval(applied.afterHours * 3_600 + schedule.heldSeconds)
            guard due <= now else {
                throw FieldError(
                    "releasedAt",
                    "step \(schedule.step) of the schedule (\(applied.percent.formatted())%) is applied, and with the release "
                        + "at \(Timestamp.formatSeconds(releasedAt)) it would not be due until \(Timestamp.formatSeconds(due)): "
                        + "end the schedule (rolloutSchedule: null) or replace it in the same PATCH", kind: .inconsistent)
            }
            schedule.startsAt = releasedAt
        }
        rolloutSchedule = schedule
    }

    /// Holds a running schedule whose next step is due at `now` (an `advance` rule: the release's signals are
    /// outside a rule's thresholds, `reason`), and a paused one whose 30 days end by `now` with a step due:
    /// the pause ends and the hold begins, the step is not applied. Nil when it runs no such step, or is held
    /// already.
    public mutating func holdSchedule(_ reason: String, now: Date) -> CatalogEvent.ScheduleNote? {
        guard var schedule = rolloutSchedule, status == .live else { return nil }
        var resumed = false
        if let end = schedule.resumesAt, end <= now {
            schedule.closeHold(at: end)
            resumed = true
        }
        guard schedule.state == .running, let next = schedule.next, next.at <= now else { return nil }
        schedule.state = .held
        schedule.since = now
        schedule.holdReason = reason
        rolloutSchedule = schedule
        return CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: resumed, held: reason)
    }

    /// Ends a rule's hold at `now` and applies the step then due, the later steps moved back by the time
    /// held. Nil when the schedule is not held.
    public mutating func releaseHold(now: Date) -> CatalogEvent.ScheduleNote? {
        guard var schedule = rolloutSchedule, schedule.state == .held else { return nil }
        schedule.closeHold(at: now)
        rolloutSchedule = schedule
        var note = advanceSchedule(now: now) ?? CatalogEvent.ScheduleNote(step: nil, percent: nil, skipped: [], resumed: false)
        note.released = true
        return note
    }

    /// The rollout worker's step at `now`: ends a pause that reached 30 days, then applies the step now
    /// due (skipping those that came due meanwhile, after downtime). Nil when nothing is due; the last
    /// step ends the schedule.
    public mutating func advanceSchedule(now: Date) -> CatalogEvent.ScheduleNote? {
        guard var schedule = rolloutSchedule, status == .live else { return nil }
        var resumed = false
        if let end = schedule.resumesAt, end <= now {
            schedule.closeHold(at: end)
            resumed = true
        }
        var due = schedule.step
        while let at = schedule.dueAt(step: due + 1), at <= now { due += 1 }
        guard resumed || due > schedule.step else { return nil }
        let skipped = Array(schedule.step + 1..<max(due, schedule.step + 1))
        let applied = due > schedule.step ? due : nil
        schedule.step = due
        rolloutPercent = schedule.steps[due - 1].percent
        rolloutSchedule = due == schedule.steps.count ? nil : schedule
        return CatalogEvent.ScheduleNote(
            step: applied, percent: applied.map { _ in rolloutPercent }, skipped: skipped, resumed: resumed)
    }
}
