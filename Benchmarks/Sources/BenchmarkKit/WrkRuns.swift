/// What every wrk script's summary says about the answers (common.lua: `rate_lines`, `latency_lines`).
public struct WrkAnswers: Sendable, Equatable {
    /// 2xx answers per second.
    public var requestsPerSecond: Double
    public var latency: Latency
    public var answered2xx: Int
    public var non2xx: Int
    /// Answers by status, as printed: "200:3725".
    public var statuses: String
    public var socketErrors: SocketErrors

    public init(_ summary: WrkSummary) throws(BenchParseError) {
        requestsPerSecond = try summary.number("requests_per_s")
        latency = try Latency(summary)
        answered2xx = try summary.integer("responses_2xx")
        non2xx = try summary.integer("responses_non_2xx")
        statuses = try summary.text("statuses")
        socketErrors = try SocketErrors(parsing: summary.text("socket_errors"))
    }
}

/// What the answers to POST /v1/events counted (`"accepted"`, `"duplicates"`, `"rejected"`), over the run.
public struct AcceptedEvents: Sendable, Equatable {
    public var accepted: Int
    /// Events the answers called duplicate or rejected: every event sent is new and valid, so none should be.
    public var notAccepted: Int
    /// Accepted events per second.
    public var perSecond: Double

    init(_ summary: WrkSummary) throws(BenchParseError) {
        accepted = try summary.integer("events_accepted")
        notAccepted = try summary.integer("events_duplicate") + summary.integer("events_rejected")
        perSecond = try summary.number("events_per_s")
    }
}

/// One wrk run: the answers every script counts, reachable as the run's own (`run.non2xx`), and what its
/// script counts besides.
@dynamicMemberLookup
public protocol WrkRun: Sendable, Equatable {
    var answers: WrkAnswers { get set }
}

extension WrkRun {
    public subscript<Value>(dynamicMember keyPath: WritableKeyPath<WrkAnswers, Value>) -> Value {
        get { answers[keyPath: keyPath] }
        set { answers[keyPath: keyPath] = newValue }
    }
}

/// A run of `events.lua` (POST /v1/events, `scripts/bench ingest`).
public struct EventsRun: WrkRun {
    public var answers: WrkAnswers
    public var events: AcceptedEvents
    /// 2xx answers naming no request that was sent.
    public var unmatched: Int
    /// Requests without a 2xx answer (in flight at wrk's deadline, or answered non-2xx).
    public var unanswered: Int
    public var samples: [String]

    public init(_ summary: WrkSummary) throws(BenchParseError) {
        answers = try WrkAnswers(summary)
        events = try AcceptedEvents(summary)
        unmatched = try summary.integer("responses_2xx_unmatched")
        unanswered = try summary.integer("requests_unanswered")
        samples = summary.non2xxSamples
    }
}

/// A run of `check.lua` (`scripts/bench check`).
public struct CheckRun: WrkRun {
    public var answers: WrkAnswers
    public var sent: Int
    /// Sent but not answered when wrk stopped (wrk does not count them).
    public var inFlight: Int
    /// Bytes per answer, headers included.
    public var bytesPerAnswer: Int
    public var samples: [String]

    public init(_ summary: WrkSummary) throws(BenchParseError) {
        answers = try WrkAnswers(summary)
        sent = try summary.integer("requests_sent")
        inFlight = try summary.integer("requests_in_flight")
        bytesPerAnswer = try summary.integer("bytes_per_response")
        samples = summary.non2xxSamples
    }
}

/// A run of `projections-report.lua`: one report URL, one connection.
public struct ReportRun: WrkRun {
    public var answers: WrkAnswers
    public var samples: [String]

    public init(_ summary: WrkSummary) throws(BenchParseError) {
        answers = try WrkAnswers(summary)
        samples = summary.sampleBodies
    }
}

/// The paced run of `projections-events.lua`: the live load of `scripts/bench projections`.
public struct LiveRun: WrkRun {
    public var answers: WrkAnswers
    public var eventsSent: Int
    public var events: AcceptedEvents
    public var inFlight: Int
    /// Slots that were already due when a connection asked: the sender fell behind its schedule.
    public var lateSlots: Int
    public var samples: [String]

    public init(_ summary: WrkSummary) throws(BenchParseError) {
        answers = try WrkAnswers(summary)
        eventsSent = try summary.integer("events_sent")
        events = try AcceptedEvents(summary)
        inFlight = try summary.integer("requests_in_flight")
        lateSlots = try summary.integer("late_slots")
        samples = summary.sampleBodies
    }
}
