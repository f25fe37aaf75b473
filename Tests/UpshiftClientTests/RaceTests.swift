import Foundation
import Testing
import UpshiftClient

/// `race(_:against:)`, the one race of the package (the SDK's check timeout and the server's
/// `withDeadline` are watchdogs over it).
@Suite struct RaceTests {
    struct Late: Error {}

    /// A gate an operation waits at, whatever its task's cancellation says, until the test opens it.
    final class Gate: @unchecked Sendable {
        private let lock = NSLock()
        private var waiting: CheckedContinuation<Void, Never>?
        private var open = false

        func wait() async {
            await withCheckedContinuation { continuation in
                let now = lock.withLock {
                    if open { return true }
                    waiting = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        }

        func release() {
            lock.withLock {
                open = true
                return waiting.take()
            }?.resume()
        }
    }

    static func never() async throws -> Never {
        try await Task.sleep(for: .seconds(3600))
        throw Late()
    }

    @Test func theOperationsAnswerWinsAndStopsTheWatchdog() async throws {
        let watchdogEnded = Lines()
        let value = try await race({ 42 }, against: {
            do { try await Task.sleep(for: .seconds(3600)) } catch { watchdogEnded.append("cancelled") }
            throw Late()
        })
        #expect(value == 42)
        for _ in 0..<200 where watchdogEnded.lines.isEmpty { try await Task.sleep(for: .milliseconds(10)) }
        #expect(watchdogEnded.lines == ["cancelled"])
        await #expect(throws: InjectedFailure.self) {
            try await race({ () async throws -> Int in throw InjectedFailure() }, against: Self.never)
        }
    }

    /// The watchdog's error wins over an operation that does not end: it is cancelled and not waited
    /// for, even when it ignores the cancellation.
    @Test func theWatchdogWinsWithoutWaitingForTheOperation() async throws {
        let gate = Gate()
        let cancelled = Lines()
        // The operation would end only when the gate opens, 60 s from now: a race that waited for it
        // would take that long, one that does not takes the watchdog's 50 ms (30 s on a loaded machine).
        let opener = Task {
            try? await Task.sleep(for: .seconds(60))
            gate.release()
        }
        let started = ContinuousClock.now
        await #expect(throws: Late.self) {
            try await race(
                {
                    await withTaskCancellationHandler { await gate.wait() } onCancel: { cancelled.append("operation") }
                    return 1
                },
                against: {
                    try await Task.sleep(for: .milliseconds(50))
                    throw Late()
                })
        }
        #expect(ContinuousClock.now - started < .seconds(30))
        #expect(cancelled.lines == ["operation"])
        opener.cancel()
        gate.release()
    }

    /// Cancelling the caller cancels the operation; what it then answers is the caller's.
    @Test func cancellingTheCallerCancelsTheOperation() async throws {
        let task = Task { try await race({ () async throws -> Int in try await Task.sleep(for: .seconds(3600)); return 1 }, against: Self.never) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}
