import Foundation
import UpshiftCore

/// One install's habits, drawn once from the fleet's random sequence: the device, how often its user opens
/// the app, how readily they update, whether it is offline for days. The fleet model of the project: the
/// simulation's installs (`SimulatedInstall`, driven through the SDK) and the tests' logs (`FleetModel`, no
/// server) are both made of these. The benchmarks' load generators keep their own (their package uses no
/// product of this one), and the tests' report oracle draws its own fleet so that it stays independent.
public struct InstallHabits: Sendable {
    public let osVersion: String
    public let locale: String
    /// Chance of opening the app on a given day.
    public let launchProbability: Double
    /// Chance a day that the store updates the app on its own, once a newer release runs on the device;
    /// zero for the long tail, which only a forced update moves.
    public let updateHazard: Double
    /// Offline installs deliver their events every few days only.
    public let offline: Bool
    public let deliveryEveryDays: Int

    public init(random: inout SplitMix64) {
        // Some devices are stuck on an OS the last release does not support.
        osVersion = random.chance(0.08) ? "15.8" : "17.\(random.int(0...5))"
        locale = ["en", "de", "fr", "en-GB"][random.int(0...3)]
        launchProbability = 0.3 + 0.65 * random.unit()
        let kind = random.unit()
        updateHazard = kind < 0.3 ? 0 : kind < 0.65 ? 0.1 : 0.5  // never (unless forced), slow, fast
        offline = random.chance(0.05)
        deliveryEveryDays = random.int(3...5)
    }
}

/// A fleet's event log without a server: installs with their habits, each day a launch as their habit says;
/// below the newest version, now and then a soft prompt, which a user who updates at all takes (updating a
/// minute later) four times in ten and otherwise dismisses.
public enum FleetModel {
    /// One event of the log, as an app would post it.
    public struct Event: Sendable {
        public var type: EventType
        public var install: UUID
        public var version: String
        public var at: Date
        /// `promptKind`, `targetVersion`, `dismissAction` or `fromVersion`, as the type has them.
        public var fields: [String: String]
        /// Its install is offline: the event reaches the server days late.
        public var late: Bool
    }

    /// The events of `installs` installs over `days` days through `versions` (oldest first; every install
    /// starts on the first): a launch on `at(day, &random)` of a day (`day` days back), and at one launch
    /// in `promptOneIn` below the newest version a soft prompt for the next one.
    public static func events(
        installs: Int, days: Int, versions: [String], promptOneIn: UInt64, random: inout SplitMix64,
        at: (Int, inout SplitMix64) -> Date
    ) -> [Event] {
        var events: [Event] = []
        for _ in 0..<installs {
            let install = UUID()
            let habits = InstallHabits(random: &random)
            var version = 0
            for day in (0..<days).reversed() {
                guard random.chance(habits.launchProbability) else { continue }
                let time = at(day, &random)
                func add(_ type: EventType, at time: Date, _ fields: [String: String] = [:]) {
                    events.append(
                        Event(type: type, install: install, version: versions[version], at: time, fields: fields, late: habits.offline))
                }
                add(.launched, at: time)
                guard version < versions.count - 1, random.next() % promptOneIn == 0 else { continue }
                let target = versions[version + 1]
                let prompt = ["promptKind": PromptKind.soft.rawValue, "targetVersion": target]
                add(.promptShown, at: time.addingTimeInterval(1), prompt)
                if habits.updateHazard > 0, random.chance(0.4) {
                    let from = versions[version]
                    version += 1
                    add(.updated, at: time.addingTimeInterval(60), ["fromVersion": from])
                } else {
                    add(.promptDismissed, at: time.addingTimeInterval(5), prompt.merging(["dismissAction": DismissAction.later.rawValue]) { $1 })
                }
            }
        }
        return events
    }
}
