/// The samples of the lag sampler (`scripts/bench.d/projections-lag.sql`), one line each:
///
///     epoch s|max lag s|name=lag s/events behind ...
public struct LagSample: Sendable, Equatable {
    public var epoch: Double
    /// The largest lag over the active projections.
    public var maximum: Double
    /// Each projection's lag, in seconds.
    public var lags: [String: Double]

    public init(epoch: Double, maximum: Double, lags: [String: Double]) {
        self.epoch = epoch
        self.maximum = maximum
        self.lags = lags
    }

    /// The sampler's output; lines that are not samples (blank lines between `\watch` runs) are skipped.
    public static func parse(_ output: String) -> [LagSample] {
        PsqlOutput(parsing: output).rows.compactMap { row in
            guard row.count >= 3, let epoch = Double(row[0]), let maximum = Double(row[1]) else { return nil }
            var lags: [String: Double] = [:]
            for part in row[2].split(separator: " ") {
                // name=lag/behind
                let pieces = part.split(whereSeparator: { $0 == "=" || $0 == "/" })
                if pieces.count >= 2, let lag = Double(pieces[1]) { lags[String(pieces[0])] = lag }
            }
            return LagSample(epoch: epoch, maximum: maximum, lags: lags)
        }
    }
}

/// Percentiles by nearest rank over sorted values: the smallest value with at least p% of the values at
/// or below it.
public struct NearestRank: Sendable, Equatable {
    public let sorted: [Double]

    public init(_ values: [Double]) {
        sorted = values.sorted()
    }

    public func percentile(_ p: Int) -> Double? {
        guard !sorted.isEmpty else { return nil }
        return sorted[(p * sorted.count + 99) / 100 - 1]
    }

    public var maximum: Double? { sorted.last }
}

/// The lag over the samples taken while the live load ran.
public struct LagSummary: Sendable, Equatable {
    public struct Projection: Sendable, Equatable {
        public var name: String
        public var p50: Double
        public var p99: Double
        public var maximum: Double
    }

    /// Samples taken in the window.
    public var count: Int
    /// Of the largest lag over projections per sample; nil without samples.
    public var p50: Double?
    public var p99: Double?
    public var maximum: Double?
    /// The time between samples, in milliseconds (the sampler asks for 200, and waits for each query).
    public var periodMilliseconds: Double?
    /// Per projection, by name.
    public var projections: [Projection]

    /// Over the samples from `start` to `end` (Unix seconds, both included).
    public init(_ samples: [LagSample], from start: Double, to end: Double) {
        let window = samples.filter { $0.epoch >= start && $0.epoch <= end }
        let overall = NearestRank(window.map(\.maximum))
        count = window.count
        p50 = overall.percentile(50)
        p99 = overall.percentile(99)
        maximum = overall.maximum
        // The window's length as printed with 3 decimals, as the figures always were.
        let seconds = Format.printed(end - start, 3)
        periodMilliseconds = window.isEmpty ? nil : 1000 * seconds / Double(window.count)
        var byName: [String: [Double]] = [:]
        for sample in window {
            for (name, lag) in sample.lags { byName[name, default: []].append(lag) }
        }
        projections = byName.keys.sorted().map { name in
            let ranks = NearestRank(byName[name] ?? [])
            return Projection(
                name: name, p50: ranks.percentile(50) ?? 0, p99: ranks.percentile(99) ?? 0, maximum: ranks.maximum ?? 0)
        }
    }
}

/// VmRSS samples of a process, one "epoch kB" line a second (`rss.txt`).
public struct RSSSamples: Sendable, Equatable {
    public struct Sample: Sendable, Equatable {
        public var epoch: Double
        public var kilobytes: Int

        public init(epoch: Double, kilobytes: Int) {
            self.epoch = epoch
            self.kilobytes = kilobytes
        }

        /// The line of the samples file.
        public var line: String { Format.fixed(epoch, 3) + " \(kilobytes)" }
    }

    public let samples: [Sample]

    public init(_ samples: [Sample]) {
        self.samples = samples
    }

    public init(parsing text: String) {
        samples = text.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count == 2, let epoch = Double(fields[0]), let kilobytes = Int(fields[1]) else { return nil }
            return Sample(epoch: epoch, kilobytes: kilobytes)
        }
    }

    /// The largest sample from `start` to `end` (every one when nil), in MiB; nil without samples.
    public func peakMiB(from start: Double? = nil, to end: Double? = nil) -> Double? {
        let window = samples.filter { ($0.epoch >= (start ?? -.infinity)) && $0.epoch <= (end ?? .infinity) }
        return window.map(\.kilobytes).max().map { (Double($0) / 1024).rounded(.toNearestOrEven) }
    }
}
