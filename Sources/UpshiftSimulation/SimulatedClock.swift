import Foundation
import UpshiftCore

/// The simulation's clock: set by the simulation only, read by the server and the SDK.
final class SimulatedClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date) { current = start }

    func now() -> Date { lock.withLock { current } }

    /// Moves forward only: the server's `recorded_at` and decisions must not go back.
    func set(_ date: Date) { lock.withLock { current = max(current, date) } }
}
