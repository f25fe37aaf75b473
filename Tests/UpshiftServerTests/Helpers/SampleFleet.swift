import Foundation
import UpshiftCore
import UpshiftSimulation

/// A few hundred installs over two weeks (the project's fleet model, `FleetModel`): launches as each install's
/// habit says, prompts, updates through three versions, and late events (offline installs deliver after
/// everything else).
func sampleFleet(now: Date, installs: Int = 240) -> [[String: String]] {
    var random = SplitMix64(seed: 7)
    let events = fleetEvents(installs: installs, random: &random, promptOneIn: 4) { day, random in
        now.addingTimeInterval(-Double(day) * 86_400 - Double(random.next() % 80_000))
    }
    return events.filter { !$0.late }.map(\.posted) + events.filter(\.late).map(\.posted)
}

/// `FleetModel.events` on ios over two weeks through 1.0.0, 1.1.0 and 1.2.0; `at` places an event of
/// `day` days ago.
func fleetEvents(
    installs: Int, random: inout SplitMix64, promptOneIn: UInt64, at: (Int, inout SplitMix64) -> Date
) -> [FleetModel.Event] {
    FleetModel.events(
        installs: installs, days: 14, versions: ["1.0.0", "1.1.0", "1.2.0"], promptOneIn: promptOneIn, random: &random,
        at: at)
}

extension FleetModel.Event {
    /// The event as an app posts it.
    var posted: [String: String] {
        clientEvent(type: type.rawValue, occurredAt: at, install: install, version: version, extra: fields)
    }
}
