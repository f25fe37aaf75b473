import Foundation
import UpshiftCore

/// A few hundred installs over two weeks: daily launches, updates through three versions, prompts,
/// and late events (some installs deliver a week late).
func sampleFleet(now: Date, installs: Int = 240) -> [[String: String]] {
    var random = SplitMix64(seed: 7)
    let events = fleetEvents(installs: installs, random: &random, promptOneIn: 6) { day, random in
        now.addingTimeInterval(-Double(day) * 86_400 - Double(random.next() % 80_000))
    }
    // Late delivery: a tenth of the events arrive after everything else.
    let late = events.enumerated().filter { $0.offset % 10 == 3 }.map(\.element)
    return events.enumerated().filter { $0.offset % 10 != 3 }.map(\.element) + late
}

/// Installs on ios over two weeks: launches on about two days of three, and on one launch in
/// `promptOneIn` (while below 1.2.0) a soft prompt followed a minute later by the update, through 1.0.0,
/// 1.1.0 and 1.2.0. `at` places an event of `day` days ago.
func fleetEvents(
    installs: Int, random: inout SplitMix64, promptOneIn: UInt64, at: (Int, inout SplitMix64) -> Date
) -> [[String: String]] {
    let versions = ["1.0.0", "1.1.0", "1.2.0"]
    var events: [[String: String]] = []
    for _ in 0..<installs {
        let install = UUID()
        var version = 0
        for day in (0..<14).reversed() {
            guard random.next() % 3 != 0 else { continue }
            let time = at(day, &random)
            if version < 2, random.next() % promptOneIn == 0 {
                events.append(
                    clientEvent(
                        type: "prompt_shown", occurredAt: time, install: install, version: versions[version],
                        extra: ["promptKind": "soft", "targetVersion": versions[version + 1]]))
                version += 1
                events.append(
                    clientEvent(
                        type: "updated", occurredAt: time.addingTimeInterval(60), install: install,
                        version: versions[version], extra: ["fromVersion": versions[version - 1]]))
            } else {
                events.append(clientEvent(occurredAt: time, install: install, version: versions[version]))
            }
        }
    }
    return events
}
