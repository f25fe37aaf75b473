import UpshiftWire

struct CheckFailed: Error, CustomStringConvertible {
    let description: String
}

struct CheckTimedOut: Error, CustomStringConvertible {
    var description: String { "no answer in time" }
}

/// Runs `operation` and waits for it at most `limit`: the answer, its error, or `CheckTimedOut`. An
/// operation that outlasts the limit is cancelled and not waited for (`race(_:against:)`).
func withTimeout<T: Sendable>(_ limit: Duration, _ operation: @escaping @Sendable () async throws -> T) async throws -> T {
    try await race(
        operation,
        against: {
            try await Task.sleep(for: limit)
            throw CheckTimedOut()
        })
}
