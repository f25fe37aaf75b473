import Foundation
import UpshiftWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends one HTTP request. The SDK's only way out; tests wrap it.
public protocol UpshiftTransport: Sendable {
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse)
}

/// `URLSession`, without its HTTP cache (the SDK decides when to ask again).
public struct URLSessionTransport: UpshiftTransport, @unchecked Sendable {
    let session: URLSession

    public init(session: URLSession? = nil) {
        if let session {
            self.session = session
        } else {
            let configuration = URLSessionConfiguration.ephemeral
            configuration.urlCache = nil
            configuration.requestCachePolicy = .reloadIgnoringLocalAndRemoteCacheData
            self.session = URLSession(configuration: configuration)
        }
    }

    public func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        #if canImport(FoundationNetworking)
            let (data, response) = try await Self.data(for: request, on: session)
        #else
            let (data, response) = try await session.data(for: request)
        #endif
        guard let http = response as? HTTPURLResponse else { throw URLError(.badServerResponse) }
        return (data, http)
    }

    #if canImport(FoundationNetworking)
        /// `data(for:)` as swift-corelibs-foundation should have it. Its own cancels the data task from the
        /// cancellation handler, which runs holding the Swift task's status lock and waits for URLSession's
        /// queue, while that queue may be resuming the same task, which needs the lock: both wait for ever
        /// (a whole test process hung that way when `stop()` cancelled a send). Here the handler only asks
        /// another queue to cancel the data task, and returns.
        static func data(for request: URLRequest, on session: URLSession) async throws -> (Data, URLResponse) {
            let pending = PendingDataTask()
            return try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { continuation in
                    let task = session.dataTask(with: request) { data, response, error in
                        if let error {
                            continuation.resume(throwing: error)
                        } else if let response {
                            continuation.resume(returning: (data ?? Data(), response))
                        } else {
                            continuation.resume(throwing: URLError(.badServerResponse))
                        }
                    }
                    pending.start(task)
                }
            } onCancel: {
                pending.cancel()
            }
        }

        /// The data task of one request, cancelled on a queue of its own, before or after it started.
        private final class PendingDataTask: @unchecked Sendable {
            private let lock = NSLock()
            private var task: URLSessionDataTask?
            private var cancelled = false

            func start(_ task: URLSessionDataTask) {
                let cancelNow = lock.withLock {
                    self.task = task
                    return cancelled
                }
                task.resume()
                if cancelNow { Self.cancelElsewhere(task) }
            }

            func cancel() {
                let task = lock.withLock {
                    cancelled = true
                    return self.task
                }
                if let task { Self.cancelElsewhere(task) }
            }

            private static func cancelElsewhere(_ task: URLSessionDataTask) {
                DispatchQueue.global().async { task.cancel() }
            }
        }
    #endif
}
