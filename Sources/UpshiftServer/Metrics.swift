import Metrics

/// How the server names its metrics, on the swift-metrics API: `upshift_<name>_total` for counters,
/// `upshift_<name>` for gauges. The composition root binds them to a Prometheus registry of the
/// application's own (``buildApplication(_:logger:onServerRunning:)``), served at `/metrics`.
enum ServerMetrics {
    static func counter(_ name: String, dimensions: [(String, String)] = [], factory: any MetricsFactory) -> Counter {
        Counter(label: "upshift_\(name)_total", dimensions: dimensions, factory: factory)
    }

    static func gauge(_ name: String, dimensions: [(String, String)] = [], factory: any MetricsFactory) -> Meter {
        Meter(label: "upshift_\(name)", dimensions: dimensions, factory: factory)
    }
}
