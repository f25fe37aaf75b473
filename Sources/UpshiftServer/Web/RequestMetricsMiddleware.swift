import Foundation
import Hummingbird
import Metrics

/// Times every request into `upshift_http_request_duration_seconds{route,method,status}`, a histogram.
/// Every label is the server's own choice, never the client's: `route` is the pattern of the route that
/// answered (`/v1/apps/{app}/check`, never a raw path or an app id; `unmatched` when none did),
/// `method` one the router answers (else `other`) and `status` the answer's code. Outermost, so that it
/// sees the status the client gets.
struct RequestMetricsMiddleware<Context: RequestContext>: RouterMiddleware {
    let factory: any MetricsFactory
    private let timers = TimerTable()

    init(factory: any MetricsFactory) {
        self.factory = factory
    }

    static var durationBuckets: [Duration] {
        [.milliseconds(1), .milliseconds(2), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
         .milliseconds(100), .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5), .seconds(10),
         .seconds(30)]
    }

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let started = ContinuousClock.now
        let method = Self.label(of: request.method)
        let response = try await next(request, context)
        // The route is known once the router matched (the context's endpoint path is shared with the
        // copies that inner layers see).
        let timer = timers.timer(
            endpoint: context.endpointPath, method: method, status: Int(response.status.code), factory: factory)
        let elapsed = ContinuousClock.now - started
        timer.recordNanoseconds(elapsed.components.seconds * 1_000_000_000 + elapsed.components.attoseconds / 1_000_000_000)
        return response
    }

    /// The method's name when the router answers it, else `other` (a client may send any token).
    static func label(of method: HTTPRequest.Method) -> String {
        switch method {
        case .get, .head, .post, .put, .patch, .delete, .options: method.rawValue
        default: "other"
        }
    }
}

/// One timer per label set, made once (a lookup in the factory per request would cost a lock and an
/// allocation each), found by the router's own endpoint path: its pattern is spelled once, with the timer.
private final class TimerTable: @unchecked Sendable {
    private struct Key: Hashable {
        let endpoint: String?
        let method: String
        let status: Int
    }
    private let lock = NSLock()
    private var timers: [Key: Metrics.Timer] = [:]

    func timer(endpoint: String?, method: String, status: Int, factory: any MetricsFactory) -> Metrics.Timer {
        let key = Key(endpoint: endpoint, method: method, status: status)
        return lock.withLock {
            if let timer = timers[key] { return timer }
            // Hummingbird names the path of its not-found answer "NotFound": no route matched.
            let route = endpoint.flatMap { $0.hasPrefix("/") ? Self.pattern($0) : nil } ?? "unmatched"
            let timer = Metrics.Timer(
                label: "upshift_http_request_duration_seconds",
                dimensions: [("route", route), ("method", method), ("status", String(status))], factory: factory)
            timers[key] = timer
            return timer
        }
    }

    /// `/v1/apps/:app/check` as OpenAPI spells it, `/v1/apps/{app}/check`.
    static func pattern(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
            segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
        }.joined(separator: "/")
    }
}
