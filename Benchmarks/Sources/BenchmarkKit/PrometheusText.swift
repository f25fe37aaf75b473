/// A /metrics page in Prometheus' text format.
public struct PrometheusText: Sendable, Equatable {
    public let text: String

    public init(_ text: String) {
        self.text = text
    }

    /// The sum of a metric's samples over all its label sets, nil when the page has none.
    public func sum(_ name: String) -> Double? {
        var sum: Double?
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: " ")
            guard let first = fields.first, let last = fields.last, fields.count >= 2,
                  first == name || first.hasPrefix(name + "{"), let value = Double(last) else { continue }
            sum = (sum ?? 0) + value
        }
        return sum
    }

    /// The sum as a whole number, or "missing": how the check summary prints a counter.
    public func printed(_ name: String) -> String {
        sum(name).map { Format.fixed($0, 0) } ?? "missing"
    }
}
