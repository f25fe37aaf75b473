import Foundation

/// Runs `operation` against `watchdog` and answers with whichever ends first: the operation's value or
/// error, or the error the watchdog throws (a deadline passed, a connection closed). The loser is
/// cancelled and not waited for, so an operation that ignores cancellation cannot hold the caller past
/// its watchdog. Cancelling the caller cancels the operation and resumes the caller at once with
/// `CancellationError`.
///
/// The one race of the package: the server's `withDeadline` and the SDK's check timeout are watchdogs
/// over it.
public func race<T: Sendable>(
    _ operation: @escaping @Sendable () async throws -> T,
    against watchdog: @escaping @Sendable () async throws -> Never
) async throws -> T {
    let outcome = RaceOutcome<T>()
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { continuation in
            outcome.start(continuation)
            let watching = Task {
                do { try await watchdog() } catch { outcome.settle(.failure(error)) }
            }
            outcome.run(
                Task {
                    defer { watching.cancel() }
                    do { outcome.settle(.success(try await operation())) } catch { outcome.settle(.failure(error)) }
                })
        }
    } onCancel: {
        outcome.cancel()
    }
}

/// Whichever of an operation and its watchdog ends first resumes the caller; the other is ignored.
private final class RaceOutcome<T: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var continuation: CheckedContinuation<T, any Error>?
    private var work: Task<Void, Never>?
    private var cancelled = false

    /// Keeps the caller's continuation, or resumes it at once when the caller was cancelled already.
    func start(_ continuation: CheckedContinuation<T, any Error>) {
        let alreadyCancelled = lock.withLock {
            if !cancelled { self.continuation = continuation }
            return cancelled
        }
        if alreadyCancelled { continuation.resume(throwing: CancellationError()) }
    }

    /// The task running the operation; cancelled at once when the caller already was.
    func run(_ work: Task<Void, Never>) {
        let cancel = lock.withLock {
            self.work = work
            return cancelled
        }
        if cancel { work.cancel() }
    }

    /// The caller was cancelled: the operation is cancelled and the caller resumes at once with
    /// `CancellationError`, without waiting for an operation that ignores cancellation.
    func cancel() {
        lock.withLock {
            cancelled = true
            return work
        }?.cancel()
        settle(.failure(CancellationError()))
    }

    /// The first result resumes the caller; a failure (the watchdog's, or the operation's own) also
    /// cancels the operation.
    func settle(_ result: Result<T, any Error>) {
        let failed = if case .failure = result { true } else { false }
        let settled = lock.withLock { () -> (CheckedContinuation<T, any Error>, Task<Void, Never>?)? in
            guard let continuation else { return nil }
            self.continuation = nil
            if failed { cancelled = true }
            return (continuation, work)
        }
        guard let (continuation, work) = settled else { return }
        if failed { work?.cancel() }
        continuation.resume(with: result)
    }
}
