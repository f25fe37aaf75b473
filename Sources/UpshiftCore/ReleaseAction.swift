/// One change of a release's offer, as the dashboard's forms and the CLI's `releases rollout` and
/// `releases withdraw` name it; each is one `PATCH` of the release. The raw values are the dashboard
/// form's `action` values.
public enum ReleaseAction: String, Sendable, CaseIterable {
    /// `rolloutPercent`: offered to that share of installs; a schedule ends.
    case rollout
    /// ``RolloutAction/halt``: offered to nobody until resumed (the dashboard's "Halt", the CLI's `--pause`).
    case halt = "pause"
    /// ``RolloutAction/resume``: undo a halt or a paused schedule.
    case resume
    /// A rollout schedule: the App Store's phased release, or custom steps.
    case schedule
    /// ``RolloutAction/pause``: the schedule stops where it is.
    case pauseSchedule = "pause-schedule"
    /// ``RolloutAction/release``: 100 % now; a schedule ends.
    case release
    /// `status: withdrawn`: offered to nobody, for good.
    case withdraw

    /// What the dashboard calls it.
    public var title: String {
        switch self {
        case .rollout: "Set rollout %"
        case .halt: "Halt"
        case .resume: "Resume"
        case .schedule: "App Store schedule"
        case .pauseSchedule: "Pause schedule"
        case .release: "Release to everyone"
        case .withdraw: "Withdraw"
        }
    }

    /// The change as the release's `PATCH` body: `percent` is `rollout`'s (required there), `steps` is
    /// `schedule`'s (the App Store's when nil).
    public func patch(percent: JSONNumber? = nil, steps: JSONValue? = nil) throws(FieldError) -> [String: JSONValue] {
        switch self {
        case .rollout:
            guard let percent else { throw FieldError("percent", "a number from 0 to 100") }
            return ["rolloutPercent": .number(percent)]
        case .halt: return ["rolloutAction": .string(RolloutAction.halt.rawValue)]
        case .resume: return ["rolloutAction": .string(RolloutAction.resume.rawValue)]
        case .schedule: return ["rolloutSchedule": steps ?? .string(RolloutSchedule.Kind.appStore.rawValue)]
        case .pauseSchedule: return ["rolloutAction": .string(RolloutAction.pause.rawValue)]
        case .release: return ["rolloutAction": .string(RolloutAction.release.rawValue)]
        case .withdraw: return ["status": .string(ReleaseStatus.withdrawn.rawValue)]
        }
    }

    /// Every action's form value, as the error of an unknown one lists them.
    public static let names = allCases.map(\.rawValue).joined(separator: ", ")
}
