import Foundation

struct CheckFailed: Error, CustomStringConvertible {
    let description: String
}

struct CheckTimedOut: Error, CustomStringConvertible {
    var description: String { "no answer in time" }
}

/// Runs `operation` and waits for it at most `limit`: the answer, its error, or `CheckTimedOut`. An
/// operation that outlasts the limit is cancelled and not waited for.
func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    let settled = SettleOnce()
    return try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<T, any Error>) in
        let work = Task {
            do {
                let value = try await operation()
                if settled.claim() { continuation.resume(returning: value) }
            } catch {
                if settled.claim() { continuation.resume(throwing: error) }
            }
        }
        Task {
            try? await Task.sleep(for: limit)
            if settled.claim() {
                work.cancel()
                continuation.resume(throwing: CheckTimedOut())
            }
        }
    }
}

/// True for the first caller only.
final class SettleOnce: @unchecked Sendable {
    private let lock = NSLock()
    private var done = false

    func claim() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        if done { return false }
        done = true
        return true
    }
}
