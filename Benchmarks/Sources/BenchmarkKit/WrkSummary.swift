/// The `upshift-bench:` lines the wrk scripts in scripts/bench.d print from `done()` (common.lua): one
/// `upshift-bench: key=value` line per figure, then up to three per-thread samples of answers that were
/// not what the run wanted (`upshift-bench: non_2xx_sample status=... body=...`, `rejected_sample ...`).
/// wrk's own report above them is not read: the scripts count what wrk does not (answers by status,
/// requests still in flight at the deadline).
public struct WrkSummary: Sendable, Equatable {
    /// Figures by key; a key printed twice keeps its last value.
    public let values: [String: String]
    /// The sample lines, without their `upshift-bench: ` prefix, in the order printed.
    public let samples: [String]

    static let prefix = "upshift-bench: "

    /// Reads a wrk output; fails when `done()` printed no summary (the script failed, or wrk did not
    /// finish).
    public init(parsing output: String) throws(BenchParseError) {
        var values: [String: String] = [:]
        var samples: [String] = []
        for line in output.split(separator: "\n", omittingEmptySubsequences: true) {
            guard line.hasPrefix(Self.prefix) else { continue }
            let rest = line.dropFirst(Self.prefix.count)
            if rest.hasPrefix("non_2xx_sample ") || rest.hasPrefix("rejected_sample ") {
                samples.append(String(rest))
            } else if let equals = rest.firstIndex(of: "=") {
                values[String(rest[..<equals])] = String(rest[rest.index(after: equals)...])
            }
        }
        guard values["responses_2xx"] != nil else {
            throw BenchParseError("wrk printed no `upshift-bench: responses_2xx=` summary line")
        }
        self.values = values
        self.samples = samples
    }

    public func text(_ key: String) throws(BenchParseError) -> String {
        guard let value = values[key] else { throw BenchParseError("wrk summary has no \(key)") }
        return value
    }

    public func integer(_ key: String) throws(BenchParseError) -> Int {
        let value = try text(key)
        guard let number = Int(value) else { throw BenchParseError("wrk summary: \(key)=\(value) is not a whole number") }
        return number
    }

    public func number(_ key: String) throws(BenchParseError) -> Double {
        let value = try text(key)
        guard let number = Double(value) else { throw BenchParseError("wrk summary: \(key)=\(value) is not a number") }
        return number
    }

    /// Samples of non-2xx answers only (`non_2xx_sample status=...`).
    public var non2xxSamples: [String] {
        samples.filter { $0.hasPrefix("non_2xx_sample ") }.map { String($0.dropFirst("non_2xx_sample ".count)) }
    }

    /// Every sample, the kind dropped: `status=... body=...` or `body=...`.
    public var sampleBodies: [String] {
        samples.map { sample in
            guard let space = sample.firstIndex(of: " ") else { return sample }
            return String(sample[sample.index(after: space)...])
        }
    }
}

/// A tool's output that does not say what the benchmark needs.
public struct BenchParseError: Error, Equatable, CustomStringConvertible {
    public let description: String

    public init(_ description: String) {
        self.description = description
    }
}

/// Latency percentiles of a wrk run, in milliseconds (common.lua's `latency_lines`).
public struct Latency: Sendable, Equatable {
    public var p50: Double
    public var p95: Double
    public var p99: Double
    public var max: Double

    public init(p50: Double, p95: Double, p99: Double, max: Double) {
        self.p50 = p50
        self.p95 = p95
        self.p99 = p99
        self.max = max
    }

    init(_ summary: WrkSummary) throws(BenchParseError) {
        self.init(
            p50: try summary.number("latency_p50_ms"), p95: try summary.number("latency_p95_ms"),
            p99: try summary.number("latency_p99_ms"), max: try summary.number("latency_max_ms"))
    }
}

/// wrk's socket errors (common.lua's `socket_errors=connect:N,read:N,write:N,timeout:N`).
public struct SocketErrors: Sendable, Equatable, CustomStringConvertible {
    public var connect: Int
    public var read: Int
    public var write: Int
    public var timeout: Int

    public init(connect: Int = 0, read: Int = 0, write: Int = 0, timeout: Int = 0) {
        self.connect = connect
        self.read = read
        self.write = write
        self.timeout = timeout
    }

    init(parsing text: String) throws(BenchParseError) {
        var counts: [String: Int] = [:]
        for part in text.split(separator: ",") {
            let pair = part.split(separator: ":")
            guard pair.count == 2, let count = Int(pair[1]) else {
                throw BenchParseError("socket_errors=\(text) is not connect:N,read:N,write:N,timeout:N")
            }
            counts[String(pair[0])] = count
        }
        guard let connect = counts["connect"], let read = counts["read"], let write = counts["write"],
              let timeout = counts["timeout"] else {
            throw BenchParseError("socket_errors=\(text) lacks a kind")
        }
        self.init(connect: connect, read: read, write: write, timeout: timeout)
    }

    public var isEmpty: Bool { connect == 0 && read == 0 && write == 0 && timeout == 0 }

    /// As the script printed it.
    public var description: String { "connect:\(connect),read:\(read),write:\(write),timeout:\(timeout)" }

    /// "0" when there were none, else as printed.
    public var compact: String { isEmpty ? "0" : description }
}
