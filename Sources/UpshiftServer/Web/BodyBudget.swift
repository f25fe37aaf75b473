import Hummingbird
import Metrics
import Synchronization

/// One bound, server-wide, on the request bodies held in memory at once (docs/OPERATIONS.md, "Limits").
/// Every request limit is per request: with the public ingest key, thousands of connections could each
/// hold a body of 1 MiB and as much inflated. Before the first byte of a body is read, the request
/// reserves what it may come to hold: its `Content-Length` (at most ``perBody``; ``perBody`` when it is
/// sent chunked), and ``perBody`` more when it is gzip. When the budget cannot cover that, the request is
/// answered `503` with `Retry-After` without its body being read, and counted.
final class BodyBudget: Sendable {
    /// The most one body may hold as received, and again once inflated: `POST /v1/events`'s limit,
    /// the largest of any route.
    static let perBody = 1 << 20

    let capacity: Int
    private let reserved = Mutex(0)
    /// `upshift_body_budget_refused_total`: requests answered `503` for want of budget.
    let refused: Counter
    /// `upshift_body_budget_reserved_bytes`: what the requests under way have reserved.
    private let inUse: Meter

    init(capacity: Int, metrics: any MetricsFactory) {
        self.capacity = capacity
        refused = Counter(label: "upshift_body_budget_refused_total", factory: metrics)
        inUse = Meter(label: "upshift_body_budget_reserved_bytes", factory: metrics)
        inUse.set(0)
    }

    /// What a request with `headers` reserves: 0 for one without a body.
    static func reservation(for headers: HTTPFields) -> Int {
        let declared: Int
        if let text = headers[.contentLength] {
            declared = min(Int(text) ?? perBody, perBody)
        } else if headers[.transferEncoding] != nil {
            declared = perBody
        } else {
            return 0
        }
        guard declared > 0 else { return 0 }
        let encoding = headers[.contentEncoding]?.lowercased()
        return declared + (encoding == "gzip" || encoding == "x-gzip" ? perBody : 0)
    }

    /// Takes `bytes` from the budget; false, with nothing taken, when they do not fit.
    func reserve(_ bytes: Int) -> Bool {
        let total: Int? = reserved.withLock { reserved in
            guard reserved + bytes <= capacity else { return nil }
            reserved += bytes
            return reserved
        }
        guard let total else {
            refused.increment()
            return false
        }
        inUse.set(total)
        return true
    }

    func release(_ bytes: Int) {
        inUse.set(reserved.withLock { reserved in
            reserved -= bytes
            return reserved
        })
    }
}

/// Reserves each request's body from the ``BodyBudget`` for as long as its handler runs.
struct BodyBudgetMiddleware<Context: RequestContext>: RouterMiddleware {
    let budget: BodyBudget

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws
        -> Response
    {
        let bytes = BodyBudget.reservation(for: request.headers)
        guard bytes > 0 else { return try await next(request, context) }
        guard budget.reserve(bytes) else {
            throw ProblemDetails.unavailable("the server holds as many request bodies as it may at once; retry shortly", retryAfter: 1)
        }
        defer { budget.release(bytes) }
        return try await next(request, context)
    }
}
