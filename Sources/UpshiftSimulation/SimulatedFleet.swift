import CompressNIO
import Foundation
import NIOCore
import UpshiftClient
import UpshiftCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A release of the simulated app, and when the team publishes it.
struct PlannedRelease: Sendable {
    var version: String
    var at: Date
    /// Day of the period it is published on (negative: before the period).
    var day: Int
    var minimumOSVersion: String
    var notes: [String]
    /// Rolled out on the App Store's phased schedule from its release (the `phased` scenario).
    var phased = false

    var body: JSONValue {
        var fields: [String: JSONValue] = [
            "platform": .string("ios"), "version": .string(version), "releasedAt": .string(Timestamp.format(at)),
            "minimumOSVersion": .string(minimumOSVersion), "notes": .object(["en": .array(notes.map(JSONValue.string))]),
        ]
        if phased { fields["rolloutSchedule"] = .string(RolloutSchedule.Kind.appStore.rawValue) }
        return .object(fields)
    }

    /// The percent its schedule has in force at `date` (100 without one).
    func percent(at date: Date) -> Double {
        guard phased else { return 100 }
        return RolloutSchedule.appStoreSteps.last { at.addingTimeInterval($0.afterHours * 3_600) <= date }?.percent ?? 0
    }
}

/// The release schedule and the policy change of a run: three releases before the period, three during
/// it (the last one needs a newer OS), and a minimum raised halfway.
struct ReleasePlan: Sendable {
    var releases: [PlannedRelease] = []
    var minimumRaiseDay: Int
    var minimumVersion = "1.0"

    /// With `phased`, the middle release of the period rolls out on the App Store's schedule.
    init(start: Date, days: Int, phased: Bool = false) {
        func at(_ day: Int, hour: Int = 10) -> Date { start.addingTimeInterval(Double(day) * 86_400 + Double(hour) * 3_600) }
        let third = max(days / 3, 1)
        let schedule: [(String, Int, String)] = [
            ("0.8", -120, "15.0"), ("0.9", -60, "15.0"), ("1.0", -20, "15.0"),
            ("1.1", min(2, days - 1), "15.0"), ("1.2", min(third + 2, days - 1), "15.0"),
            ("2.0", min(2 * third + 2, days - 1), "16.0"),
        ]
        var seen = Set<Int>()
        for (version, day, os) in schedule {
            // One release a day at most (short runs squeeze the schedule).
            var day = day
            while day >= 0, seen.contains(day) { day += 1 }
            guard day < days else { continue }
            seen.insert(day)
            releases.append(
                PlannedRelease(
                    version: version, at: at(day), day: day, minimumOSVersion: os, notes: ["What is new in \(version)"],
                    phased: phased && version == "1.2"))
        }
        minimumRaiseDay = days / 2
    }

    /// The policy: reminders after 2 days, checks every 6 hours; halfway, a minimum.
    func policy(minimum: Bool) -> JSONValue {
        var fields: [String: JSONValue] = [
            "enabled": .bool(true), "remindIntervalSeconds": .number(JSONNumber(2 * 86_400)), "checkIntervalSeconds": .number(JSONNumber(6 * 3_600)),
        ]
        if minimum { fields["minimumVersion"] = .string(minimumVersion) }
        return .object(fields)
    }
}

/// One install of the fleet: its device, its habits, and the version it runs.
struct SimulatedInstall: Sendable {
    let index: Int
    var version: String
    let habits: InstallHabits
    /// An update the user started (or the store made): the next launch runs it.
    var pendingUpdate: String?
    var launched = false

    init(index: Int, random: inout SplitMix64) {
        self.index = index
        let roll = random.unit()
        version = roll < 0.15 ? "0.8" : roll < 0.40 ? "0.9" : "1.0"
        habits = InstallHabits(random: &random)
    }

    /// One launch of the app: the SDK starts, checks, and the user answers the prompt. True when the
    /// user started an update from a prompt (the app opens again on the new version soon after).
    mutating func launch(
        configuration: (String) -> UpshiftConfiguration, releases: [PlannedRelease], online: Bool,
        random: inout SplitMix64
    ) async -> Bool {
        if let target = pendingUpdate {
            version = target
            pendingUpdate = nil
        }
        let sdk = Upshift(configuration: configuration(version))
        await sdk.launch()
        launched = true
        let decision = await sdk.check()
        var startedUpdate = false
        if let target = decision.latestVersion {
            switch decision.action {
            case .force:
                await sdk.record(.promptShown(kind: .force, targetVersion: target))
                if random.chance(0.7) {
                    await sdk.record(.updateStarted(kind: .force, targetVersion: target))
                    pendingUpdate = target
                    startedUpdate = true
                } else {
                    await sdk.record(.blocked(targetVersion: target))
                }
            case .soft:
                await sdk.record(.promptShown(kind: .soft, targetVersion: target))
                let answer = random.unit()
                // The long tail never updates from a soft prompt (only a force moves it).
                if answer < 0.4, habits.updateHazard > 0 {
                    await sdk.record(.updateStarted(kind: .soft, targetVersion: target))
                    pendingUpdate = target
                    startedUpdate = true
                } else if answer < 0.85 || decision.server?.allowSkip == false {
                    await sdk.remindLater(decision)
                } else {
                    await sdk.skip(decision)
                }
            case .none:
                break
            }
        }
        // The store's own updates: to the newest release this device can run.
        if pendingUpdate == nil, let os = Version(habits.osVersion), let current = Version(version) {
            let newest = releases.filter { Version($0.version)! > current && Version($0.minimumOSVersion)! <= os }
                .max { Version($0.version)! < Version($1.version)! }
            if let newest, random.chance(habits.updateHazard) { pendingUpdate = newest.version }
        }
        if await sdk.whatsNew != nil { await sdk.whatsNewShown() }
        if online { await sdk.flush() }
        await sdk.stop()
        return startedUpdate
    }
}

/// A stored event as the simulation saw it go through: what the reports count.
struct Fact: Sendable {
    var install: String
    var at: Date
    var version: String
    var type: String
    var target: String?
    var kind: String?
    var action: String?
    /// The order the server stored it in (ties in `at` go to the later).
    var order: Int
    /// A check's answer: the version it offered (`latestVersion` of a soft or force), nil for none.
    var offered: String?
}

