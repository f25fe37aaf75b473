import Foundation
import Hummingbird
import NIOCore
import Synchronization
import UpshiftCore

/// Check answers already computed for one app in the current catalog snapshot.
///
/// A decision is a pure function of the request, the catalog and `now`, and constant in `now` between
/// the catalog's time boundaries (`DecisionEngine.timeBoundaries`). So an answer is reused while the
/// snapshot is the same (a reload makes a new cache) and the clock is still in the interval it was
/// computed in. Requests whose answer could depend on the install id are not cached.
final class CheckAnswerCache: Sendable {
    struct Answer: Sendable {
        var body: ByteBuffer
        var etag: String
        var headers: HTTPFields
        /// The question it answers, less the install id (for the `checked` observation).
        var request: CheckRequest
        var action: CheckAction
        var reason: CheckReason
        var latestVersion: String?
        /// Index of the time interval it was computed in.
        var interval: Int
        /// Whether another install id could get another answer (a partial rollout on the platform).
        var dependsOnInstall: Bool
    }

    /// Sorted time boundaries per platform, and whether the install id matters there.
    private let boundaries: [String: [Date]]
    private let installSensitive: [String: Bool]
    private let answers = Mutex<[String: Answer]>([:])
    /// Distinct requests kept per app; past this the cache starts over (bounded memory).
    static let maximumEntries = 20_000

    init(catalog: AppCatalog) {
        var boundaries: [String: [Date]] = [:]
        var installSensitive: [String: Bool] = [:]
        for platform in catalog.releases.keys {
            boundaries[platform] = DecisionEngine.timeBoundaries(catalog, platform: platform)
            installSensitive[platform] = DecisionEngine.dependsOnInstall(catalog, platform: platform)
        }
        self.boundaries = boundaries
        self.installSensitive = installSensitive
    }

    func dependsOnInstall(platform: String) -> Bool {
        installSensitive[platform] ?? false
    }

    /// Which time interval `now` falls in for `platform`.
    func interval(platform: String, now: Date) -> Int {
        guard let instants = boundaries[platform] else { return 0 }
        var low = 0
        var high = instants.count
        while low < high {
            let middle = (low + high) / 2
            if instants[middle] <= now { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The answer kept for `key`, when the clock is still in the interval it was computed in.
    func answer(_ key: String, now: Date) -> Answer? {
        guard let answer = answers.withLock({ $0[key] }) else { return nil }
        return answer.interval == interval(platform: answer.request.platform, now: now) ? answer : nil
    }

    func store(_ key: String, _ answer: Answer) {
        answers.withLock { answers in
            if answers.count >= Self.maximumEntries { answers.removeAll(keepingCapacity: true) }
            answers[key] = answer
        }
    }
}
