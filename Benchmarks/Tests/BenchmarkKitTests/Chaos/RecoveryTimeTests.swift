import Testing

@testable import BenchmarkKit

/// How long ingestion took to recover after PostgreSQL returned (at 10 s in these cases).
@Suite struct RecoveryTimeTests {
    static func events(_ sent: Double, _ answered: Double, _ status: Int?) -> Exchange {
        Exchange(endpoint: .events, sentAt: sent, answeredAt: answered, status: status, retryAfter: status == 503)
    }

    @Test func theFirstSuccessAfterTheLastFailure() {
        let exchanges = [
            Self.events(9.0, 9.1, 503),  // sent while PostgreSQL was down: not counted
            Self.events(10.2, 10.3, 503),
            Self.events(10.5, 11.0, 200),  // a success, but a failure was sent after it
            Self.events(11.2, 11.3, nil),
            Self.events(11.4, 12.5, 200),
            Self.events(11.6, 12.0, 200),  // answered first among those after the last failure
            Self.events(13.0, 13.1, 200),
        ]
        #expect(RecoveryTime.seconds(exchanges, returned: 10, end: 20) == 2.0)
    }

    @Test func withoutAFailureItIsTheFirstSuccess() {
        let exchanges = [Self.events(9.5, 10.4, 200), Self.events(10.1, 10.25, 200), Self.events(10.2, 10.3, 200)]
        #expect(RecoveryTime.seconds(exchanges, returned: 10, end: 20) == 0.25)
    }

    @Test func noSuccessAfterTheLastFailureIsNoRecovery() {
        let exchanges = [Self.events(10.2, 10.3, 200), Self.events(10.5, 10.6, 500)]
        #expect(RecoveryTime.seconds(exchanges, returned: 10, end: 20) == nil)
        #expect(RecoveryTime.seconds([], returned: 10, end: 20) == nil)
    }

    /// Answers after the end (the next fault) and checks do not count.
    @Test func onlyEventsAnsweredBeforeTheEndCount() {
        let exchanges = [
            Self.events(10.2, 10.3, 503),
            Exchange(endpoint: .check, sentAt: 10.4, answeredAt: 10.5, status: 200),
            Self.events(14.0, 21.0, 200),
        ]
        #expect(RecoveryTime.seconds(exchanges, returned: 10, end: 20) == nil)
        #expect(RecoveryTime.seconds(exchanges, returned: 10, end: 30) == 11.0)
    }
}
