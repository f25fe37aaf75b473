import Prometheus

extension PrometheusCollectorRegistry {
    /// The counter `upshift_<name>_total` (created once; the same name returns the same counter).
    func counter(_ name: String, labels: [(String, String)] = [], help: String) -> Counter {
        makeCounter(
            descriptor: MetricNameDescriptor(namespace: "upshift", metricName: name, unitName: "total", helpText: help),
            labels: labels)
    }
}

extension PrometheusCollectorRegistry {
    /// The gauge `upshift_<name>` (created once; the same name returns the same gauge).
    func gauge(_ name: String, help: String) -> Gauge {
        makeGauge(descriptor: MetricNameDescriptor(namespace: "upshift", metricName: name, helpText: help))
    }
}
