/// One request of the chaos load and how it ended, in seconds from the start of the load.
public struct Exchange: Sendable, Equatable {
    public enum Endpoint: String, Sendable, Equatable {
        /// `POST /v1/events`
        case events
        /// `GET /v1/apps/{app}/check` with an install id
        case check
    }

    public var endpoint: Endpoint
    public var sentAt: Double
    /// When the answer arrived, or when the request failed without one.
    public var answeredAt: Double
    /// The HTTP status; nil when no answer came (connection refused or reset, timed out).
    public var status: Int?
    /// Whether the answer carried a `Retry-After` header.
    public var retryAfter: Bool

    public init(endpoint: Endpoint, sentAt: Double, answeredAt: Double, status: Int?, retryAfter: Bool = false) {
        self.endpoint = endpoint
        self.sentAt = sentAt
        self.answeredAt = answeredAt
        self.status = status
        self.retryAfter = retryAfter
    }

    public var isSuccess: Bool { status.map { (200..<300).contains($0) } ?? false }

    /// How the summaries name the outcome: "200", "503 with Retry-After", "503 without Retry-After",
    /// "500", "no answer".
    public var outcome: String {
        guard let status else { return Self.noAnswer }
        if status == 503 || status == 429 { return "\(status) " + (retryAfter ? "with" : "without") + " Retry-After" }
        return String(status)
    }

    public static let noAnswer = "no answer"
    public static let unavailableWithRetryAfter = "503 with Retry-After"
}

/// Outcomes counted: outcome → number of exchanges.
public struct OutcomeCounts: Sendable, Equatable, CustomStringConvertible {
    public private(set) var counts: [String: Int] = [:]

    public init() {}

    public init(_ exchanges: some Sequence<Exchange>) {
        for exchange in exchanges { add(exchange.outcome) }
    }

    public mutating func add(_ outcome: String, _ count: Int = 1) {
        counts[outcome, default: 0] += count
    }

    public var total: Int { counts.values.reduce(0, +) }

    public subscript(_ outcome: String) -> Int { counts[outcome] ?? 0 }

    /// Outcomes other than `allowed`.
    public func others(than allowed: Set<String>) -> [String] {
        counts.keys.filter { !allowed.contains($0) }.sorted()
    }

    /// "200 1,234, 503 with Retry-After 56, no answer 7": statuses in numeric order, "no answer" last.
    public var description: String {
        if counts.isEmpty { return "none" }
        return counts.keys.sorted(by: Self.order).map { "\($0) \(Format.grouped(counts[$0]!))" }.joined(separator: ", ")
    }

    static func order(_ a: String, _ b: String) -> Bool {
        if a == Exchange.noAnswer { return false }
        if b == Exchange.noAnswer { return true }
        return a < b
    }
}
