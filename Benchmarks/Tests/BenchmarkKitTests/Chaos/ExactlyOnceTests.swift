import Foundation
import Testing

@testable import BenchmarkKit

/// Every event acknowledged with 200 is stored exactly once, by id.
@Suite struct ExactlyOnceTests {
    static let ids = (0..<6).map { _ in UUID() }

    @Test func holdsWhenEveryAcknowledgedEventIsStoredOnce() {
        let ids = Self.ids
        // ids[4] was sent, its answer lost, and stored; ids[5] sent, never stored.
        let verdict = ExactlyOnce(
            sent: Set(ids), acknowledged: Set(ids[0..<4]),
            stored: [ids[0]: 1, ids[1]: 1, ids[2]: 1, ids[3]: 1, ids[4]: 1])
        #expect(verdict.holds)
        #expect(verdict.acknowledged == 4)
        #expect(verdict.storedOnce == 4)
        #expect(verdict.sentUnacknowledged == 2)
        #expect(verdict.storedUnacknowledged == 1)
    }

    @Test func anAcknowledgedEventMissingFails() {
        let ids = Self.ids
        let verdict = ExactlyOnce(sent: Set(ids), acknowledged: Set(ids[0..<2]), stored: [ids[0]: 1])
        #expect(!verdict.holds)
        #expect(verdict.missing == [ids[1]])
    }

    @Test func anEventStoredTwiceFailsAcknowledgedOrNot() {
        let ids = Self.ids
        let acknowledgedTwice = ExactlyOnce(sent: Set(ids), acknowledged: [ids[0]], stored: [ids[0]: 2])
        #expect(!acknowledgedTwice.holds)
        #expect(acknowledgedTwice.storedMoreThanOnce == [ids[0]])
        #expect(acknowledgedTwice.storedOnce == 0)
        let unacknowledgedTwice = ExactlyOnce(
            sent: Set(ids), acknowledged: [ids[0]], stored: [ids[0]: 1, ids[1]: 2])
        #expect(!unacknowledgedTwice.holds)
    }

    @Test func anEventNobodySentFails() {
        let ids = Self.ids
        let stranger = UUID()
        let verdict = ExactlyOnce(sent: Set(ids), acknowledged: [ids[0]], stored: [ids[0]: 1, stranger: 1])
        #expect(!verdict.holds)
        #expect(verdict.neverSent == [stranger])
    }

    @Test func aRejectedEventFails() {
        let ids = Self.ids
        var rejected = OutcomeCounts()
        rejected.add("id_conflict appVersion")
        #expect(!ExactlyOnce(sent: Set(ids), acknowledged: [ids[0]], stored: [ids[0]: 1], rejected: rejected).holds)
    }

    /// A run that acknowledged nothing proves nothing.
    @Test func nothingAcknowledgedFails() {
        #expect(!ExactlyOnce(sent: Set(Self.ids), acknowledged: [], stored: [:]).holds)
    }
}
