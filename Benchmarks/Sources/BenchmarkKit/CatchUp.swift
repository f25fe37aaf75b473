/// How fast `upshift serve` applied a loaded log to every projection, from launching it to the batch that
/// applied the last event (`projections.updated_at`).
public struct CatchUp: Sendable, Equatable {
    public struct Projection: Sendable, Equatable {
        public var name: String
        /// Seconds from launch, rounded to hundredths as printed.
        public var seconds: Double
        public var eventsPerSecond: Double
    }

    public var events: Int
    /// By name.
    public var projections: [Projection]

    /// `caughtUpAt`: when each projection's batch reached all `events` (Unix seconds); `start`: the launch.
    public init(events: Int, start: Double, caughtUpAt: [String: Double]) {
        self.events = events
        projections = caughtUpAt.keys.sorted().map { name in
            let seconds = Format.printed((caughtUpAt[name] ?? start) - start, 2)
            return Projection(name: name, seconds: seconds, eventsPerSecond: seconds > 0 ? Double(events) / seconds : 0)
        }
    }

    /// When the last one caught up.
    public var seconds: Double { projections.map(\.seconds).max() ?? 0 }

    /// All projections: the events over the time the slowest took.
    public var eventsPerSecond: Double { seconds > 0 ? Double(events) / seconds : 0 }

    /// The progress line printed every 10 s while catching up:
    ///
    ///     16:50:12 +10s adoption 1200  install_state 900  | slowest: 90 events/s, ETA 1100 s
    ///
    /// the slowest projection's rate so far and when it would be done at that rate.
    public static func progressLine(
        clock: String, elapsed: Double, progress: [ProjectionProgress], total: Int
    ) -> String {
        let counts = progress.map { "\($0.name) \($0.events)  " }.joined()
        let least = progress.map(\.events).min() ?? 0
        let seconds = Format.printed(elapsed, 3)
        let rate = seconds > 0 ? Double(least) / seconds : 0
        let eta = rate > 0 ? Format.fixed(Double(total - least) / rate, 0) + " s" : "?"
        return "\(clock) +\(Format.fixed(elapsed, 0))s \(counts)| slowest: \(Format.fixed(rate, 0)) events/s, ETA \(eta)"
    }
}
