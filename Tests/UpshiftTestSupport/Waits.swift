import Foundation
import Synchronization

/// What the tests of this process are waiting on, so that a wait that never ends names itself: every
/// minute, each wait older than five minutes is written to standard error with its age. A test run
/// that hangs shows where (scripts/test ends a phase after 20 minutes and lists the tests running).
public enum Waits {
    private static let open = Mutex<[Int: (name: String, since: ContinuousClock.Instant)]>([:])
    private static let counter = Atomic<Int>(0)
    private static let reporter: Void = {
        Thread.detachNewThread {
            while true {
                Thread.sleep(forTimeInterval: 60)
                let now = ContinuousClock.now
                let old = open.withLock { $0.values.filter { now - $0.since > .seconds(300) } }
                for wait in old.sorted(by: { $0.since < $1.since }) {
                    FileHandle.standardError.write(Data("waiting for \(now - wait.since): \(wait.name)\n".utf8))
                }
            }
        }
    }()

    /// Runs `body`, known as `name` while it runs.
    public static func named<T>(_ name: String, _ body: () async throws -> T) async rethrows -> T {
        _ = reporter
        let id = counter.add(1, ordering: .relaxed).newValue
        open.withLock { $0[id] = (name, .now) }
        defer { _ = open.withLock { $0.removeValue(forKey: id) } }
        return try await body()
    }

    /// Asks `condition` every `interval` until it holds; throws, naming `what`, when `timeout` passes
    /// first. The one wait of the tests: every "until" of a test goes through it.
    public static func until(
        _ what: String, timeout: Duration, every interval: Duration = .milliseconds(50),
        _ condition: () async throws -> Bool
    ) async throws {
        try await named(what) {
            let deadline = ContinuousClock.now.advanced(by: timeout)
            while try await !condition() {
                guard ContinuousClock.now < deadline else { throw TimedOut(description: "not within \(timeout): \(what)") }
                try await Task.sleep(for: interval)
            }
        }
    }

    public struct TimedOut: Error, CustomStringConvertible {
        public let description: String
    }
}
