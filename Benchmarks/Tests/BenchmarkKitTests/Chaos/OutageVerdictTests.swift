import Testing

@testable import BenchmarkKit

/// What the server answered while PostgreSQL was down (from 10 s to 12 s in these cases).
@Suite struct OutageVerdictTests {
    static func exchange(_ endpoint: Exchange.Endpoint, at answered: Double, _ status: Int?, retryAfter: Bool = false) -> Exchange {
        Exchange(endpoint: endpoint, sentAt: answered - 0.01, answeredAt: answered, status: status, retryAfter: retryAfter)
    }

    static let good = [
        exchange(.check, at: 9.5, nil),  // before the window: not counted
        exchange(.check, at: 10.5, 200), exchange(.check, at: 11.5, 200),
        exchange(.events, at: 10.1, 200),  // committed just before the stop
        exchange(.events, at: 10.6, 503, retryAfter: true), exchange(.events, at: 11.9, 503, retryAfter: true),
        exchange(.events, at: 12.5, 500),  // after the window: not counted here
    ]

    @Test func holdsWithChecks200AndEvents503WithRetryAfter() {
        let verdict = OutageVerdict(Self.good, down: 10, up: 12)
        #expect(verdict.holds)
        #expect(verdict.checks["200"] == 2)
        #expect(verdict.events[Exchange.unavailableWithRetryAfter] == 2)
        #expect(verdict.events.description == "200 1, 503 with Retry-After 2")
        #expect(abs(verdict.lastEventsSuccess! - 0.1) < 1e-9)
    }

    @Test(arguments: [
        exchange(.check, at: 11, 503, retryAfter: true), exchange(.check, at: 11, nil), exchange(.check, at: 11, 500),
    ])
    func aCheckNot200Fails(_ bad: Exchange) {
        let verdict = OutageVerdict(Self.good + [bad], down: 10, up: 12)
        #expect(!verdict.checksHold)
        #expect(verdict.eventsHold)
    }

    @Test(arguments: [
        exchange(.events, at: 11, 500), exchange(.events, at: 11, 503), exchange(.events, at: 11, nil),
        exchange(.events, at: 11, 429, retryAfter: true),
    ])
    func eventsOtherThan503WithRetryAfterFail(_ bad: Exchange) {
        let verdict = OutageVerdict(Self.good + [bad], down: 10, up: 12)
        #expect(!verdict.eventsHold)
        #expect(verdict.checksHold)
    }

    /// A window nobody saw proves nothing.
    @Test func anUnobservedOutageFails() {
        #expect(!OutageVerdict(Self.good, down: 20, up: 21).holds)
        let onlyChecks = OutageVerdict(Self.good.filter { $0.endpoint == .check }, down: 10, up: 12)
        #expect(onlyChecks.checksHold && !onlyChecks.eventsHold)
    }
}
