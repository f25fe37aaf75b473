import Foundation
import UpshiftCore

/// `day 12/45  61,204 events  1,530 events/s` on standard error, redrawn on a terminal.
struct ProgressLine: Sendable {
    let enabled: Bool
    let days: Int
    let started = ContinuousClock.now
    let terminal = isatty(STDERR_FILENO) != 0

    func update(day: Int, events: Int) {
        guard enabled else { return }
        let line = "day \(day)/\(days)  \(events.grouped) events  \(rate(events).grouped) events/s"
        FileHandle.standardError.write(Data((terminal ? "\r" + line : line + "\n").utf8))
    }

    func finish(events: Int) {
        guard enabled else { return }
        update(day: days, events: events)
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    func rate(_ events: Int) -> Int {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        return seconds > 0 ? Int(Double(events) / seconds) : 0
    }
}
