import Foundation

/// The installs the chaos load speaks for, and the events and checks it sends for them: valid events of
/// every client type (so that every projection has work), with ids and installs drawn from the run's
/// seed. A batch is built once and kept as bytes, so that a resend is the same request, byte for byte.
///
/// Its own fleet, not the project's model (`UpshiftSimulation`'s `InstallHabits`): the `Benchmarks/` package
/// uses no product of the main package, so that the main package declares nothing for the benchmarks and an app
/// using `UpshiftClient` resolves nothing else.
public struct ChaosFleet: Sendable {
    public struct Install: Sendable, Equatable {
        public var id: UUID
        public var platform: String
        /// Index into `versions`.
        public var version: Int
        public var osVersion: String
        public var locale: String
    }

    /// The releases the run's catalog holds for both platforms, oldest first. The last one is released
    /// halfway through the run, so that its time-to-update cohort fills while the faults happen; installs
    /// start on one of the others.
    public static let versions = ["1.0.0", "1.1.0", "1.2.0", "2.0.0", "2.1.0"]
    public static let platforms = ["ios", "android"]

    public let app: String
    public private(set) var installs: [Install]
    private var random: SeededRandom

    public init(app: String, installs count: Int, seed: UInt64) {
        self.app = app
        // Its own stream, so that the fleet does not shift when the plan draws more or fewer numbers.
        random = SeededRandom(seed: seed ^ 0x5EED_F1EE_7000_0001)
        installs = []
        for _ in 0..<count {
            let platform = Self.platforms[random.index(Self.platforms.count)]
            installs.append(Install(
                id: Self.uuid(&random), platform: platform, version: random.index(Self.versions.count - 1),
                osVersion: platform == "ios" ? ["16.4", "17.2", "18.0"][random.index(3)] : ["12", "13", "14"][random.index(3)],
                locale: ["en-US", "de-AT", "fr", "ja-JP"][random.index(4)]))
        }
    }

    /// A version 4 UUID from the seeded stream (RFC 9562 section 5.4: version and variant bits set).
    static func uuid(_ random: inout SeededRandom) -> UUID {
        let high = random.next(), low = random.next()
        var bytes = [UInt8](repeating: 0, count: 16)
        for index in 0..<8 {
            bytes[index] = UInt8(truncatingIfNeeded: high >> (56 - 8 * index))
            bytes[8 + index] = UInt8(truncatingIfNeeded: low >> (56 - 8 * index))
        }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        return UUID(uuid: (
            bytes[0], bytes[1], bytes[2], bytes[3], bytes[4], bytes[5], bytes[6], bytes[7],
            bytes[8], bytes[9], bytes[10], bytes[11], bytes[12], bytes[13], bytes[14], bytes[15]))
    }

    /// A batch of `count` events, each of a random install, that happened up to 2 minutes before `now`.
    public mutating func batch(_ count: Int, now: Date) -> Batch {
        var ids: [UUID] = []
        var events: [String] = []
        for _ in 0..<count {
            let id = Self.uuid(&random)
            ids.append(id)
            events.append(event(id: id, occurredAt: now.addingTimeInterval(-random.unit() * 120)))
        }
        return Batch(ids: ids, body: Data(("{\"events\":[" + events.joined(separator: ",") + "]}").utf8))
    }

    /// The query of a check by a random install: `platform`, `version`, `os`, `locale` and `install`.
    public mutating func checkQuery() -> String {
        let install = installs[random.index(installs.count)]
        return "platform=\(install.platform)&version=\(Self.versions[install.version])&os=\(install.osVersion)"
            + "&locale=\(install.locale)&install=\(install.id.uuidString.lowercased())"
    }

    /// One event as JSON, of a type drawn by weight: mostly launches; prompts and their answers; updates.
    mutating func event(id: UUID, occurredAt: Date) -> String {
        let index = random.index(installs.count)
        var install = installs[index]
        let version = Self.versions[install.version]
        let target = Self.versions[min(install.version + 1, Self.versions.count - 1)]
        let kind = random.chance(0.7) ? "soft" : "force"
        var fields: [(String, String)]
        var appVersion = version
        switch random.index(100) {
        case 0..<45: fields = [("type", "launched")]
        case 45..<60: fields = [("type", "prompt_shown"), ("promptKind", kind), ("targetVersion", target)]
        case 60..<70:
            fields = [
                ("type", "prompt_dismissed"), ("promptKind", "soft"), ("targetVersion", target),
                ("dismissAction", random.chance(0.5) ? "later" : "skip"),
            ]
        case 70..<78: fields = [("type", "update_started"), ("promptKind", kind), ("targetVersion", target)]
        case 78..<88 where install.version < Self.versions.count - 1:
            install.version += 1
            installs[index] = install
            appVersion = Self.versions[install.version]
            fields = [("type", "updated"), ("fromVersion", version)]
        case 88..<93: fields = [("type", "blocked"), ("targetVersion", target)]
        case 93..<100: fields = [("type", "whats_new_shown")]
        default: fields = [("type", "launched")]
        }
        let head: [(String, String)] = [
            ("id", id.uuidString.lowercased()), ("occurredAt", Self.timestamp(occurredAt)),
            ("installId", install.id.uuidString.lowercased()), ("platform", install.platform), ("appVersion", appVersion),
            ("osVersion", install.osVersion), ("locale", install.locale), ("appId", app),
        ]
        return "{" + (head + fields).map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
    }

    /// RFC 3339 in UTC with milliseconds: "2026-11-24T16:49:32.123Z".
    static func timestamp(_ date: Date) -> String {
        let milliseconds = Int64((date.timeIntervalSince1970 * 1000).rounded(.down))
        let seconds = milliseconds / 1000, millis = Int(milliseconds % 1000)
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents(
            [.year, .month, .day, .hour, .minute, .second], from: Date(timeIntervalSince1970: TimeInterval(seconds)))
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.year!, parts.month!, parts.day!, parts.hour!, parts.minute!,
            parts.second!, millis)
    }
}

/// A request body of events, kept to be sent again unchanged.
public struct Batch: Sendable, Equatable {
    /// The events' ids, in the order of the body (the answer's `results[].index`).
    public let ids: [UUID]
    public let body: Data
}

/// What a `200` of `POST /v1/events` says of each event: its id and status.
public struct IngestAnswer: Sendable, Equatable {
    public struct Result: Sendable, Equatable {
        public var index: Int
        public var status: String
        /// A rejection's `error.code` and `error.field`: "unknown_type type".
        public var error: String?
    }

    public let results: [Result]

    public init(parsing data: Data) throws {
        guard let object = try JSONSerialization.jsonObject(with: data) as? [String: Any],
              let results = object["results"] as? [[String: Any]]
        else { throw BenchParseError("a 200 of /v1/events without `results`: \(String(decoding: data.prefix(200), as: UTF8.self))") }
        self.results = try results.map { result in
            guard let index = result["index"] as? Int, let status = result["status"] as? String else {
                throw BenchParseError("a result without index or status: \(result)")
            }
            let error = (result["error"] as? [String: Any]).map { error in
                [error["code"] as? String, error["field"] as? String].compactMap { $0 }.joined(separator: " ")
            }
            return Result(index: index, status: status, error: error)
        }
    }

    /// The ids of `batch` the server stored or had stored (`accepted`, `duplicate`), how many of them it
    /// had stored before (`duplicate`), and the errors of those it rejected.
    public func settle(_ batch: Batch) -> (stored: [UUID], duplicates: Int, rejected: [String]) {
        var stored: [UUID] = [], duplicates = 0, rejected: [String] = []
        for result in results where batch.ids.indices.contains(result.index) {
            switch result.status {
            case "accepted": stored.append(batch.ids[result.index])
            case "duplicate":
                stored.append(batch.ids[result.index])
                duplicates += 1
            default: rejected.append(result.error ?? result.status)
            }
        }
        return (stored, duplicates, rejected)
    }
}
