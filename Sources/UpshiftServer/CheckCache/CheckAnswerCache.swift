import Foundation
import Hummingbird
import Metrics
import NIOCore
import Synchronization
import UpshiftCore

/// When an app's check answers change with the clock alone, and whether they can depend on the install.
///
/// A decision is a pure function of the request, the catalog and `now`, and constant in `now` between the
/// catalog's time boundaries (`DecisionEngine.timeBoundaries`), so an answer is reused while the clock is
/// still in the interval it was computed in.
struct CheckTiming: Sendable {
    /// Sorted time boundaries per platform, and whether the install id matters there.
    private let boundaries: [Platform: [Date]]
    private let installSensitive: [Platform: Bool]

    init(_ catalog: AppCatalog) {
        var boundaries: [Platform: [Date]] = [:]
        var installSensitive: [Platform: Bool] = [:]
        for platform in catalog.releases.keys {
            boundaries[platform] = DecisionEngine.timeBoundaries(catalog, platform: platform)
            installSensitive[platform] = DecisionEngine.dependsOnInstall(catalog, platform: platform)
        }
        self.boundaries = boundaries
        self.installSensitive = installSensitive
    }

    /// Whether another install id could get another answer (a partial rollout on the platform).
    func dependsOnInstall(platform: Platform) -> Bool {
        installSensitive[platform] ?? false
    }

    /// Which time interval `now` falls in for `platform`.
    func interval(platform: Platform, now: Date) -> Int {
        guard let instants = boundaries[platform] else { return 0 }
        var low = 0
        var high = instants.count
        while low < high {
            let middle = (low + high) / 2
            if instants[middle] <= now { low = middle + 1 } else { high = middle }
        }
        return low
    }
}

/// Check answers already computed, for every app of this instance, within one budget of bytes (keys and
/// bodies counted): the least recently used go first when it is full.
///
/// Two kinds of entries share the budget. An answer is keyed by the parsed, normalized question
/// (``Question``: platform, canonical version, OS, locale, channel, previous), so unknown parameters,
/// `build` and other spellings of one version (`1.0+a`, `1.0+b`, `01.0`) neither split nor grow it.
/// The answer repeats the version as the request wrote it (`installedVersion`), so an answer kept for
/// one spelling is served to another with that field respelled (``Answer/respelled(as:)``). In front of it, a GET's raw query (without `install`, at most
/// ``maximumIndexedQuery`` bytes) maps to the request it parses to and its question, so that a repeated
/// query skips parsing and normalizing; the request kept there carries the build, OS and locale of that
/// very query, which the `checked` observation records.
final class CheckAnswerCache: Sendable {
    struct Answer: Sendable {
        var body: ByteBuffer
        var etag: String
        var headers: HTTPFields
        var action: CheckAction
        var reason: CheckReason
        var latestVersion: String?
        /// Index of the time interval it was computed in.
        var interval: Int
        /// Whether another install id could get another answer (a partial rollout on the platform).
        var dependsOnInstall: Bool
        /// The installed version as the request that computed it wrote it, and where the body repeats it
        /// (the bytes of the `installedVersion` string, without quotes).
        var spelling: String
        private var spellingRange: Range<Int>?
        /// What tells each install its `stalenessDays` (nil when the action is `none`), the value the body
        /// holds and where (the bytes of the number or `null`).
        var offered: Staleness?
        var stalenessDays: Int?
        private var stalenessRange: Range<Int>?

        init(
            body: ByteBuffer, etag: String, headers: HTTPFields, action: CheckAction, reason: CheckReason,
            latestVersion: String?, interval: Int, dependsOnInstall: Bool, installedVersion: String,
            offered: Staleness?, stalenessDays: Int?
        ) {
            self.body = body
            self.etag = etag
            self.headers = headers
            self.action = action
            self.reason = reason
            self.latestVersion = latestVersion
            self.interval = interval
            self.dependsOnInstall = dependsOnInstall
            spelling = installedVersion
            spellingRange = Self.range(after: "\"installedVersion\":\"\(installedVersion)\"", dropping: 1, in: body)
                .map { $0.lowerBound - installedVersion.utf8.count..<$0.lowerBound }
            self.offered = offered
            self.stalenessDays = stalenessDays
            if offered != nil {
                let value = stalenessDays.map(String.init) ?? "null"
                stalenessRange = Self.range(after: "\"stalenessDays\":\(value)", dropping: 0, in: body)
                    .map { $0.lowerBound - value.utf8.count..<$0.lowerBound }
            }
        }

        /// Where the first `pattern` of the body ends, less `dropping` bytes. A key and its colon, with the
        /// quotes unescaped, only occur as that key: inside a JSON string a quote is escaped.
        private static func range(after pattern: String, dropping: Int, in body: ByteBuffer) -> Range<Int>? {
            guard let start = offset(of: Array(pattern.utf8), in: body) else { return nil }
            let end = start + pattern.utf8.count - dropping
            return end..<end
        }

        /// The first offset of `pattern` in the readable bytes of `body`, with memchr and memcmp: bodies
        /// with long notes are searched once per computed answer, and the generic search of a
        /// `ByteBufferView` took most of the time of answering a question not asked before.
        static func offset(of pattern: [UInt8], in body: ByteBuffer) -> Int? {
            body.withUnsafeReadableBytes { bytes -> Int? in
                guard let base = bytes.baseAddress, let first = pattern.first, pattern.count <= bytes.count else { return nil }
                let last = bytes.count - pattern.count
                var start = 0
                while start <= last, let hit = memchr(base + start, Int32(first), last - start + 1) {
                    let index = base.distance(to: UnsafeRawPointer(hit))
                    if pattern.withUnsafeBytes({ memcmp(base + index, $0.baseAddress!, pattern.count) }) == 0 { return index }
                    start = index + 1
                }
                return nil
            }
        }

        /// This answer for a request that wrote the same version another way (`1.0.0` for `1.0`): the
        /// same decision with `installedVersion` as that request wrote it, and the ETag of that body.
        /// Nil when the body cannot be respelled (a spelling JSON would escape; never for a valid version).
        func respelled(as text: String) -> Answer? {
            guard let range = spellingRange,
                text.utf8.allSatisfy({ $0 >= 0x21 && $0 <= 0x7E && $0 != UInt8(ascii: "\"") && $0 != UInt8(ascii: "\\") })
            else { return nil }
            var answer = replacing(range, with: text)
            answer.spelling = text
            return answer
        }

        /// This answer as `installId` gets it at `now`: the same decision with that install's
        /// `stalenessDays`, `null` without an install. The decision is shared by installs; this is not.
        func staleness(for installId: String?, now: Date) -> Answer {
            guard let offered, stalenessRange != nil else { return self }
            let days = installId.map { offered.days(installId: $0, now: now) }
            guard days != stalenessDays, let range = stalenessRange else { return self }
            var answer = replacing(range, with: days.map(String.init) ?? "null")
            answer.stalenessDays = days
            return answer
        }

        /// The body with `range` replaced by `text`, its ETag, and the places of the spliced values moved.
        private func replacing(_ range: Range<Int>, with text: String) -> Answer {
            let bytes = body.readableBytesView
            var spliced = ByteBuffer()
            spliced.reserveCapacity(bytes.count - range.count + text.utf8.count)
            spliced.writeBytes(bytes.prefix(range.lowerBound))
            spliced.writeString(text)
            spliced.writeBytes(bytes.dropFirst(range.upperBound))
            let replaced = range.lowerBound..<(range.lowerBound + text.utf8.count)
            func moved(_ other: Range<Int>?) -> Range<Int>? {
                guard let other else { return nil }
                if other == range { return replaced }
                let shift = other.lowerBound >= range.upperBound ? replaced.count - range.count : 0
                return (other.lowerBound + shift)..<(other.upperBound + shift)
            }
            var answer = self
            answer.body = spliced
            answer.etag = "\"\(EntityTag.fnv1a(Data(spliced.readableBytesView)))\""
            answer.headers[.eTag] = answer.etag
            answer.spellingRange = moved(spellingRange)
            answer.stalenessRange = moved(stalenessRange)
            return answer
        }
    }

    /// What an answer depends on, besides the catalog (its `generation`) and the clock.
    struct Question: Hashable, Sendable {
        var app: AppID
        var generation: Int
        var platform: Platform
        /// Canonical (``Version/canonical``): every spelling of a version is one question.
        var version: String
        var os: String?
        var locale: String?
        var channel: UpshiftCore.Channel
        var previous: String?

        init(_ request: CheckRequest, app: AppID, generation: Int) {
            self.app = app
            self.generation = generation
            platform = request.platform
            version = request.version.canonical
            os = request.os?.canonical
            locale = request.locale.map(LocaleTag.normalize)
            channel = request.channel
            previous = request.previous?.canonical
        }

        var bytes: Int {
            app.rawValue.utf8.count + platform.rawValue.utf8.count + version.utf8.count + (os?.utf8.count ?? 0)
                + (locale?.utf8.count ?? 0) + (previous?.utf8.count ?? 0)
        }
    }

    /// A feed's parameters, normalized: what its answer depends on besides the app's catalog and the clock.
    struct UpdateFeedParameters: Hashable, Sendable {
        enum Kind: Hashable, Sendable { case appcast, lookup, versionsPlist }
        var kind: Kind
        var platform: Platform
        var channel: UpshiftCore.Channel
        /// Normalized (``LocaleTag/normalize(_:)``), as the request chose it.
        var locale: String?
        /// The lookup's parameters cannot name this app (another `bundleId` or `id`): no result.
        var refused = false
        /// The lookup's `bundleId`, echoed for an app without one on the platform.
        var bundleId: String?
    }

    /// A feed answer's key: the app's catalog generation and the feed's parameters.
    struct UpdateFeedQuestion: Hashable, Sendable {
        var app: AppID
        var generation: Int
        var parameters: UpdateFeedParameters

        var bytes: Int {
            app.rawValue.utf8.count + parameters.platform.rawValue.utf8.count + (parameters.locale?.utf8.count ?? 0)
                + (parameters.bundleId?.utf8.count ?? 0)
        }
    }

    /// A feed's bytes and the headers they are served with.
    struct UpdateFeedAnswer: Sendable {
        var body: ByteBuffer
        var etag: String
        var headers: HTTPFields
        /// Index of the time interval it was computed in.
        var interval: Int
    }

    private enum Key: Hashable {
        case query(app: AppID, generation: Int, query: String)
        case answer(Question)
        case feed(UpdateFeedQuestion)
    }

    private enum Entry {
        case request(CheckRequest, Question)
        case answer(Answer)
        case feed(UpdateFeedAnswer)
    }

    /// Queries longer than this are answered but not indexed.
    static let maximumIndexedQuery = 1024
    /// What an entry costs beyond the bytes of its strings and body: the table's node and the
    /// dictionary slot, the request or answer struct, header storage.
    static let entryOverhead = 256

    private let table: Mutex<LRUTable<Key, Entry>>
    let byteLimit: Int
    /// `upshift_check_cache_bytes`: ``bytes``, set after each store.
    private let held: Meter

    init(byteLimit: Int, metrics: any MetricsFactory = NOOPMetricsHandler.instance) {
        self.byteLimit = byteLimit
        table = Mutex(LRUTable(capacity: byteLimit))
        held = Meter(label: "upshift_check_cache_bytes", factory: metrics)
    }

    private func keep(_ entry: Entry, for key: Key, cost: Int) {
        let used = table.withLock {
            $0.set(entry, for: key, cost: cost)
            return $0.used
        }
        held.set(Double(used))
    }

    /// The bytes held now (never above ``byteLimit``).
    var bytes: Int { table.withLock { $0.used } }

    /// The request a raw query parsed to earlier, and its question, for this app's current catalog.
    func request(app: AppID, generation: Int, query: String) -> (request: CheckRequest, question: Question)? {
        guard query.utf8.count <= Self.maximumIndexedQuery else { return nil }
        let entry = table.withLock { $0.value(for: .query(app: app, generation: generation, query: query)) }
        if case .request(let request, let question) = entry { return (request, question) }
        return nil
    }

    func store(_ request: CheckRequest, question: Question, query: String) {
        guard query.utf8.count <= Self.maximumIndexedQuery else { return }
        let cost = Self.entryOverhead + query.utf8.count + Self.bytes(of: request) + question.bytes
        let key = Key.query(app: question.app, generation: question.generation, query: query)
        keep(.request(request, question), for: key, cost: cost)
    }

    /// The answer to `question`, when the clock is still in the interval it was computed in.
    func answer(_ question: Question, interval: Int) -> Answer? {
        let entry = table.withLock { $0.value(for: .answer(question)) }
        guard case .answer(let answer) = entry, answer.interval == interval else { return nil }
        return answer
    }

    func store(_ answer: Answer, for question: Question) {
        let cost = Self.entryOverhead + question.bytes + Self.bytes(of: answer.body, answer.etag, answer.headers)
            + (answer.latestVersion?.utf8.count ?? 0)
        keep(.answer(answer), for: .answer(question), cost: cost)
    }

    /// The feed answer to `question`, when the clock is still in the interval it was computed in.
    func feed(_ question: UpdateFeedQuestion, interval: Int) -> UpdateFeedAnswer? {
        let entry = table.withLock { $0.value(for: .feed(question)) }
        guard case .feed(let answer) = entry, answer.interval == interval else { return nil }
        return answer
    }

    func store(_ answer: UpdateFeedAnswer, for question: UpdateFeedQuestion) {
        let cost = Self.entryOverhead + question.bytes + Self.bytes(of: answer.body, answer.etag, answer.headers)
        keep(.feed(answer), for: .feed(question), cost: cost)
    }

    /// The bytes an answer holds: its body, its tag and its headers' names and values.
    private static func bytes(of body: ByteBuffer, _ etag: String, _ headers: HTTPFields) -> Int {
        body.readableBytes + etag.utf8.count
            + headers.reduce(0) { $0 + $1.name.rawName.utf8.count + $1.value.utf8.count }
    }

    private static func bytes(of request: CheckRequest) -> Int {
        request.platform.rawValue.utf8.count + request.version.text.utf8.count + (request.os?.text.utf8.count ?? 0)
            + (request.locale?.utf8.count ?? 0) + (request.previous?.text.utf8.count ?? 0)
    }
}
