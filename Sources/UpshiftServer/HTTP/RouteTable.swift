import HTTPTypes
import Synchronization

/// The paths the router answers and their methods, so that a method a path does not answer (any
/// method, `QUERY` included) is `405` with `Allow` (RFC 9110 §15.5.6) rather than `404`.
final class RouteTable: Sendable {
    private let routes = Mutex<[(segments: [Substring], methods: [HTTPRequest.Method])]>([])

    func load(_ described: [(method: HTTPRequest.Method, path: String)]) {
        var byPath: [String: [HTTPRequest.Method]] = [:]
        for route in described { byPath[route.path, default: []].append(route.method) }
        routes.withLock { routes in
            routes = byPath.map { path, methods in (path.split(separator: "/"), methods) }
        }
    }

    /// The methods of the route `path` matches (a `{name}` or `:name` segment matches any one segment).
    func methods(of path: String) -> [HTTPRequest.Method]? {
        let segments = path.split(separator: "/")
        return routes.withLock { routes in
            routes.first { route in
                route.segments.count == segments.count
                    && zip(route.segments, segments).allSatisfy { $0.0.hasPrefix(":") || $0.0.hasPrefix("{") || $0.0 == $0.1 }
            }?.methods
        }
    }
}
