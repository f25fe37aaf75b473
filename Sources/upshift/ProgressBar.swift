import Foundation
import Synchronization
import UpshiftCore
import UpshiftStore

/// `[#######.....]  61%  6,100,000 events  52,310 events/s  ETA 1m 14s` on standard error: redrawn in
/// place on a terminal, a line every few seconds otherwise.
final class ProgressBar: Sendable {
    private struct State {
        var lastDraw = ContinuousClock.now - .seconds(10)
        var started = ContinuousClock.now
    }

    private let total: Int64
    private let state = Mutex(State())
    private let isTerminal = isatty(STDERR_FILENO) != 0

    init(total: Int64) { self.total = total }

    func update(_ generation: ProjectionGeneration) {
        let now = ContinuousClock.now
        let line: String? = state.withLock { state in
            guard now - state.lastDraw >= (isTerminal ? .milliseconds(200) : .seconds(5)) else { return nil }
            state.lastDraw = now
            return Self.line(generation, total: total, elapsed: now - state.started)
        }
        if let line { draw(line) }
    }

    func finish(_ generation: ProjectionGeneration) {
        let elapsed = state.withLock { ContinuousClock.now - $0.started }
        draw(Self.line(generation, total: generation.events, elapsed: elapsed))
        if isTerminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }

    private func draw(_ line: String) {
        FileHandle.standardError.write(Data((isTerminal ? "\r" + line : line + "\n").utf8))
    }

    /// `total`: the events the rebuild will apply, as far as known (the feed's last position, which
    /// counts every event written and a few rolled back). Done is the events applied, not the checkpoint's
    /// position: the feed runs in commit order, and a position may be lower than one applied before it.
    static func line(_ generation: ProjectionGeneration, total: Int64, elapsed: Duration) -> String {
        let done = generation.events
        let fraction = total > 0 ? min(1, Double(done) / Double(total)) : 1
        let width = 30
        let filled = Int(fraction * Double(width))
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = seconds > 0 ? Double(done) / seconds : 0
        let remaining = rate > 0 ? Double(max(0, total - done)) / rate : 0
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "] "
            + String(format: "%3.0f%%", fraction * 100)
            + "  \(Int(generation.events).grouped) events  \(Int(rate).grouped) events/s  ETA \(duration(remaining))"
    }

    static func duration(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return total >= 60 ? "\(total / 60)m \(total % 60)s" : "\(total)s"
    }
}
