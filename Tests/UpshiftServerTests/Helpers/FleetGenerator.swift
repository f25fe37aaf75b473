import Foundation
import UpshiftCore

// A deterministic simulated fleet for the report ground-truth test: installs, their events, when each
// event reaches the server, and the release catalog as the team edits it. Everything here is written
// independently of the server (its own version order, RFC 3339 writer and report arithmetic; the PRNG is Core's),
// so that the expected reports cannot inherit a bug from the code under test.

// MARK: - Randomness

/// The fleet's draws on top of Core's `SplitMix64`.
extension SplitMix64 {
    mutating func ms(_ range: ClosedRange<Int64>) -> Int64 {
        range.lowerBound + Int64(next() % UInt64(range.upperBound - range.lowerBound + 1))
    }

    mutating func weighted<T>(_ items: [(T, Double)]) -> T {
        let total = items.reduce(0) { $0 + $1.1 }
        var point = unit() * total
        for (item, weight) in items {
            if point < weight { return item }
            point -= weight
        }
        return items[items.count - 1].0
    }

    /// Exponentially distributed milliseconds with the given mean.
    mutating func exponential(meanMs: Double) -> Int64 {
        Int64(-log(1 - unit()) * meanMs)
    }

    /// A random (version 4) UUID in lowercase canonical form.
    mutating func uuid() -> String {
        let high = (next() & 0xFFFF_FFFF_FFFF_0FFF) | 0x0000_0000_0000_4000
        let low = (next() & 0x3FFF_FFFF_FFFF_FFFF) | 0x8000_0000_0000_0000
        var bytes = [UInt8](repeating: UInt8(ascii: "-"), count: 36)
        let digits = Array("0123456789abcdef".utf8)
        var position = 0
        for (word, shiftStart) in [(high, 60), (low, 60)] {
            var shift = shiftStart
            while shift >= 0 {
                if position == 8 || position == 13 || position == 18 || position == 23 { position += 1 }
                bytes[position] = digits[Int((word >> UInt64(shift)) & 0xF)]
                position += 1
                shift -= 4
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    mutating func shuffle<T>(_ items: inout [T]) {
        guard items.count > 1 else { return }
        for index in stride(from: items.count - 1, to: 0, by: -1) {
            items.swapAt(index, Int(next() % UInt64(index + 1)))
        }
    }
}

extension String {
    func leftPadded(_ width: Int, with pad: Character = "0") -> String {
        count >= width ? self : String(repeating: pad, count: width - count) + self
    }
}

// MARK: - Versions and time, written from the definitions

/// A plain numeric version (`1.4.0`): components compare numerically, missing ones are 0.
/// The fleet only uses numeric versions, so this is all of the version rules (docs/ARCHITECTURE.md, "Versions") the test needs.
struct FleetVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// As sent in events and catalog writes.
    let text: String
    /// Numeric components without trailing zeros (equality and hashing use these).
    let parts: [Int]

    init(_ text: String) {
        self.text = text
        var parts = text.split(separator: ".").map { Int($0)! }
        while parts.last == 0 { parts.removeLast() }
        self.parts = parts
    }

    var description: String { text }

    /// The report spelling: at least three components.
    var normalized: String {
        var numbers = parts
        while numbers.count < 3 { numbers.append(0) }
        return numbers.map(String.init).joined(separator: ".")
    }

    static func == (lhs: FleetVersion, rhs: FleetVersion) -> Bool { lhs.parts == rhs.parts }
    func hash(into hasher: inout Hasher) { hasher.combine(parts) }

    static func < (lhs: FleetVersion, rhs: FleetVersion) -> Bool {
        for index in 0..<max(lhs.parts.count, rhs.parts.count) {
            let a = index < lhs.parts.count ? lhs.parts[index] : 0
            let b = index < rhs.parts.count ? rhs.parts[index] : 0
            if a != b { return a < b }
        }
        return false
    }
}

/// Times are integer milliseconds since 1970 (events carry millisecond precision).
enum FleetTime {
    static let second: Int64 = 1_000
    static let minute: Int64 = 60_000
    static let hour: Int64 = 3_600_000
    static let day: Int64 = 86_400_000

    static func dayNumber(_ ms: Int64) -> Int64 {
        ms >= 0 ? ms / day : -((-ms + day - 1) / day)
    }

    /// `yyyy-mm-dd` of a day number (days since 1970-01-01), by the proleptic Gregorian calendar.
    static func dayText(_ number: Int64) -> String {
        // Walk years and months: slow but obviously right, and only a few hundred calls.
        var remaining = number
        var year: Int64 = 1970
        func isLeap(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }
        while remaining < 0 {
            year -= 1
            remaining += isLeap(year) ? 366 : 365
        }
        while remaining >= (isLeap(year) ? 366 : 365) {
            remaining -= isLeap(year) ? 366 : 365
            year += 1
        }
        let lengths: [Int64] = [31, isLeap(year) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31]
        var month = 0
        while remaining >= lengths[month] {
            remaining -= lengths[month]
            month += 1
        }
        return "\(year)-" + String(month + 1).leftPadded(2) + "-" + String(remaining + 1).leftPadded(2)
    }

    static func dayText(ofTime ms: Int64) -> String { dayText(dayNumber(ms)) }

    /// RFC 3339 in UTC with milliseconds: `2026-01-08T14:03:27.123Z`.
    static func rfc3339(_ ms: Int64) -> String {
        let dayStart = dayNumber(ms) * day
        let inDay = ms - dayStart
        let hours = inDay / hour
        let minutes = inDay % hour / minute
        let seconds = inDay % minute / second
        let millis = inDay % second
        return dayText(dayNumber(ms)) + "T" + String(hours).leftPadded(2) + ":" + String(minutes).leftPadded(2) + ":"
            + String(seconds).leftPadded(2) + "." + String(millis).leftPadded(3) + "Z"
    }

    static func date(_ ms: Int64) -> Date { Date(timeIntervalSince1970: Double(ms) / 1000) }
}

// MARK: - The fleet

struct FleetRelease: Sendable {
    let platform: String
    let version: FleetVersion
    let releasedAt: Int64
    let channel: String
    let minimumOS: FleetVersion?
    let maximumOS: FleetVersion?
    /// When the team writes it to the catalog (before, at or after `releasedAt`).
    let createdAt: Int64
    /// When the team withdraws it (a PATCH), if ever.
    let withdrawnAt: Int64?

    func isWithdrawn(at time: Int64) -> Bool { withdrawnAt.map { time >= $0 } ?? false }

    func admits(os: FleetVersion?) -> Bool {
        guard let os else { return true }
        if let minimumOS, os < minimumOS { return false }
        if let maximumOS, os > maximumOS { return false }
        return true
    }
}

struct FleetInstall: Sendable {
    let id: String
    let platform: String
    /// Testers install releases (beta ones too) up to two days before they are out.
    let isTester: Bool
    let isOffline: Bool
}

struct FleetEvent: Sendable {
    let id: String
    let type: String
    let occurredAt: Int64
    let install: Int
    let platform: String
    let version: FleetVersion
    let os: FleetVersion?
    let locale: String
    var promptKind: String? = nil
    var target: FleetVersion? = nil
    var dismissAction: String? = nil
    var from: FleetVersion? = nil
    /// The time the client posts it (the server's clock is set to this first).
    var deliveredAt: Int64 = 0

    /// The event as the client posts it: one JSON object. Written by hand, since every value is plain ASCII
    /// (UUIDs, versions, timestamps, locale tags) and a debug build spends seconds in JSONSerialization.
    func json(installs: [FleetInstall]) -> String {
        var fields = [
            ("id", id), ("type", type), ("occurredAt", FleetTime.rfc3339(occurredAt)), ("installId", installs[install].id),
            ("platform", platform), ("appVersion", version.text), ("locale", locale),
        ]
        if let os { fields.append(("osVersion", os.text)) }
        if let promptKind { fields.append(("promptKind", promptKind)) }
        if let target { fields.append(("targetVersion", target.text)) }
        if let dismissAction { fields.append(("dismissAction", dismissAction)) }
        if let from { fields.append(("fromVersion", from.text)) }
        return "{" + fields.map { "\"\($0.0)\":\"\($0.1)\"" }.joined(separator: ",") + "}"
    }
}

/// One request to `POST /v1/events`.
struct FleetPost: Sendable {
    let at: Int64
    /// Indexes into `Fleet.events`.
    let events: [Int]
    let expectedAccepted: Int
    let expectedDuplicates: Int
    let isShuffled: Bool
}

enum FleetAction: Sendable {
    case createRelease(Int)
    case withdrawRelease(Int)
    case post(FleetPost)
    /// Wait for the projections and compare every report with the events delivered so far.
    case checkpoint

    var order: Int {
        switch self {
        case .createRelease, .withdrawRelease: 0
        case .post: 1
        case .checkpoint: 2
        }
    }
}

struct Fleet: Sendable {
    static let appId: AppID = "fleet"
    /// 2026-01-01T00:00:00Z, day 0 of the simulation.
    static let start: Int64 = 1_767_225_600_000
    static let simulatedDays: Int64 = 60
    /// Deliveries are grouped into 4-hour slots: the client posts what it has at the slot's end.
    static let slot: Int64 = 4 * FleetTime.hour
    /// The last delivery slot, and the time of the final reports.
    static let lastDelivery = start + 61 * FleetTime.day
    static let end = start + 61 * FleetTime.day + 6 * FleetTime.hour

    var installs: [FleetInstall] = []
    var releases: [FleetRelease] = []
    var events: [FleetEvent] = []
    /// In the order the test performs them; each with the server time to set first.
    var timeline: [(at: Int64, action: FleetAction)] = []
    var resends = 0
    var shuffledPosts = 0

    static func at(day: Int64, _ hours: Int64 = 0, _ minutes: Int64 = 0, _ seconds: Int64 = 0, ms: Int64 = 0) -> Int64 {
        start + day * FleetTime.day + hours * FleetTime.hour + minutes * FleetTime.minute + seconds * FleetTime.second + ms
    }

    static let releaseSchedule: [FleetRelease] = {
        func r(
            _ platform: String, _ version: String, _ releasedAt: Int64, created: Int64, minOS: String?,
            maxOS: String? = nil, channel: String = "live", withdrawn: Int64? = nil
        ) -> FleetRelease {
            FleetRelease(
                platform: platform, version: FleetVersion(version), releasedAt: releasedAt, channel: channel,
                minimumOS: minOS.map(FleetVersion.init), maximumOS: maxOS.map(FleetVersion.init), createdAt: created,
                withdrawnAt: withdrawn)
        }
        return [
            // Before the simulation: written to the catalog when it starts.
            r("ios", "0.9.0", at(day: -40, 9, 12, 3, ms: 456), created: start, minOS: "14.0.0"),
            r("ios", "1.0.0", at(day: -15, 16, 0, 0, ms: 1), created: start, minOS: "15.0.0"),
            // Written ahead of time.
            r("ios", "1.1.0", at(day: 8, 14, 3, 27, ms: 123), created: at(day: 5, 10), minOS: "15.0.0"),
            // Written the moment it goes out.
            r("ios", "1.2.0", at(day: 18, 10, 30, 0, ms: 500), created: at(day: 18, 10, 30, 0, ms: 500), minOS: "15.0.0"),
            // Written three days late: the server must seed its cohort from the log.
            r("ios", "1.3.0", at(day: 28, 7, 45, 12, ms: 987), created: at(day: 31, 11), minOS: "15.0.0", maxOS: "18.9.0"),
            r("ios", "1.4.0", at(day: 38, 16, 20, 41, ms: 4), created: at(day: 37, 9), minOS: "16.0.0"),
            // Pulled after two days.
            r("ios", "1.4.1", at(day: 41, 12), created: at(day: 41, 12), minOS: "16.0.0", withdrawn: at(day: 43, 8)),
            r("ios", "1.5.0", at(day: 48, 18, 59, 59, ms: 999), created: at(day: 48, 18, 59, 59, ms: 999), minOS: "17.0.0"),
            // Beta channel: only testers take it; never lets anyone satisfy a minimum.
            r("ios", "1.6.0", at(day: 54, 2, 0, 0, ms: 250), created: at(day: 53, 15), minOS: "17.0.0", channel: "beta"),
            // Still in the future when the reports are read.
            r("ios", "1.7.0", at(day: 62, 9), created: at(day: 58, 12), minOS: "17.0.0"),
            r("android", "1.0.0", at(day: -20, 11, 11, 11, ms: 111), created: start, minOS: "10.0.0"),
            r("android", "1.1.0", at(day: 12, 8, 0, 0, ms: 321), created: at(day: 12, 8, 0, 0, ms: 321), minOS: "10.0.0"),
            r("android", "1.2.0", at(day: 33, 20, 15, 30, ms: 777), created: at(day: 35, 9), minOS: "12.0.0"),
        ]
    }()

    /// The minimum version the app's policy enforces with a force prompt (the client's behaviour; the
    /// test never writes the policy since it does not call the check).
    static func enforcedMinimum(platform: String, at time: Int64) -> FleetVersion? {
        if platform == "ios" {
            if time >= at(day: 45) { return FleetVersion("1.2.0") }
            if time >= at(day: 25) { return FleetVersion("1.1.0") }
            return nil
        }
        return time >= at(day: 40) ? FleetVersion("1.1.0") : nil
    }

    /// Checkpoints at which every report is compared: mid-run (after the backdated 1.3.0 was written and
    /// before android 1.2.0 is) and at the end.
    static let checkpoints: [Int64] = [at(day: 34), end]

    // MARK: Generation

    static func generate(seed: UInt64, iosInstalls: Int, androidInstalls: Int) -> Fleet {
        var fleet = Fleet()
        fleet.releases = releaseSchedule
        var rng = SplitMix64(seed: seed)
        let total = iosInstalls + androidInstalls
        for index in 0..<total {
            var simulation = InstallSimulation(
                index: index, platform: index < iosInstalls ? "ios" : "android", releases: fleet.releases, rng: &rng)
            simulation.run(rng: &rng)
            fleet.installs.append(simulation.install)
            fleet.events.append(contentsOf: simulation.events)
        }
        fleet.addBoundaryInstalls(rng: &rng)
        fleet.schedule(rng: &rng)
        return fleet
    }

    /// A few hand-made installs whose events sit exactly on the edges of the definitions: at R, R − 7 days,
    /// R + 1 / 7 / 30 days, first shown + 7 days, midnight, and now − window. The random fleet almost never
    /// lands on an edge, and an edge is where a `<` written as `<=`, or a timestamp that loses a
    /// microsecond on its way through a Double, shows.
    private mutating func addBoundaryInstalls(rng: inout SplitMix64) {
        let v110 = releases.first { $0.platform == "ios" && $0.version == FleetVersion("1.1.0") }!
        let r = v110.releasedAt
        let old = FleetVersion("1.0.0"), new = v110.version
        let day = FleetTime.day
        typealias Step = (type: String, at: Int64, version: FleetVersion, extra: [String: String])
        func launched(_ at: Int64, _ version: FleetVersion = old) -> Step { ("launched", at, version, [:]) }
        func updated(_ at: Int64) -> Step { ("updated", at, new, ["from": "1.0.0"]) }
        let shown = r + 2 * day + 1_000
        let lives: [[Step]] = [
            // Time-to-update of 1.1.0: in the cohort from R − 7 days on (inclusive), T = 0 at R exactly.
            [launched(r - 7 * day), updated(r)],
            // Last seen 1 ms before the window: not in the cohort.
            [launched(r - 7 * day - 1), updated(r + 2 * FleetTime.hour)],
            // T = exactly 1, 7 and 30 days (each counts for that day), and 1 day + 1 ms (does not).
            [launched(r - 1), updated(r + day)],
            [launched(r - 2 * day), updated(r + 7 * day)],
            [launched(r - 2 * day), updated(r + 30 * day)],
            [launched(r - 3 * day), updated(r + day + 1)],
            // Seen at R exactly, but still on the old version: T comes from the later update.
            [launched(r - day), launched(r), updated(r + 3 * day + 777)],
            // Converted exactly 7 days after the first prompt, and 1 ms too late.
            [launched(shown - 1_000), ("prompt_shown", shown, old, ["kind": "soft", "target": "1.1.0"]),
             ("prompt_dismissed", shown + 4_000, old, ["kind": "soft", "target": "1.1.0", "dismiss": "later"]),
             ("prompt_shown", shown + day, old, ["kind": "soft", "target": "1.1.0"]), updated(shown + 7 * day)],
            [launched(shown - 1_000), ("prompt_shown", shown, old, ["kind": "soft", "target": "1.1.0"]),
             ("update_started", shown + 9_000, old, ["kind": "soft", "target": "1.1.0"]), updated(shown + 7 * day + 1)],
            // The last millisecond of a day and the first of the next.
            [launched(Self.at(day: 20) - 1), updated(Self.at(day: 20))],
            // Last seen exactly at the start of the 7-day and 30-day windows of the final reports, and 1 ms before.
            [launched(Self.end - 7 * day)],
            [launched(Self.end - 7 * day - 1)],
            [launched(Self.end - 30 * day)],
            [launched(Self.end - 30 * day - 1)],
        ]
        for steps in lives {
            let install = installs.count
            installs.append(FleetInstall(id: rng.uuid(), platform: "ios", isTester: false, isOffline: false))
            for step in steps {
                events.append(FleetEvent(
                    id: rng.uuid(), type: step.type, occurredAt: step.at, install: install, platform: "ios",
                    version: step.version, os: FleetVersion("16.7.0"), locale: "en", promptKind: step.extra["kind"],
                    target: step.extra["target"].map(FleetVersion.init), dismissAction: step.extra["dismiss"],
                    from: step.extra["from"].map(FleetVersion.init), deliveredAt: step.at + FleetTime.hour))
            }
        }
    }

    /// Groups events into posts by delivery slot, adds retries and catalog writes, in time order.
    private mutating func schedule(rng: inout SplitMix64) {
        var bySlot: [Int64: [Int]] = [:]
        for (index, event) in events.enumerated() {
            var slot = Self.start + ((event.deliveredAt - Self.start + Self.slot - 1) / Self.slot) * Self.slot
            slot = min(slot, Self.lastDelivery)
            precondition(slot >= event.occurredAt && slot - event.occurredAt <= 21 * FleetTime.day)
            events[index].deliveredAt = slot
            bySlot[slot, default: []].append(index)
        }
        var actions: [(at: Int64, action: FleetAction)] = []
        var previousChunk: [Int] = []
        var retryNextSlot: [Int] = []
        for slot in bySlot.keys.sorted() {
            var indexes = bySlot[slot]!
            let shuffled = rng.chance(0.3)
            if shuffled {
                rng.shuffle(&indexes)
                shuffledPosts += 1
            }
            if !retryNextSlot.isEmpty {
                // A client that timed out last slot sends the same batch again.
                actions.append((slot, .post(FleetPost(
                    at: slot, events: retryNextSlot, expectedAccepted: 0, expectedDuplicates: retryNextSlot.count,
                    isShuffled: false))))
                resends += 1
                retryNextSlot = []
            }
            var offset = 0
            while offset < indexes.count {
                let size = min(rng.int(200...490), indexes.count - offset)
                let chunk = Array(indexes[offset..<(offset + size)])
                offset += size
                var body = chunk
                var duplicates = 0
                if !previousChunk.isEmpty, rng.chance(0.05) {
                    // Some already-posted events ride along again.
                    let extra = Array(previousChunk.prefix(rng.int(1...5)))
                    body = extra + body
                    duplicates = extra.count
                }
                actions.append((slot, .post(FleetPost(
                    at: slot, events: body, expectedAccepted: chunk.count, expectedDuplicates: duplicates,
                    isShuffled: shuffled))))
                if rng.chance(0.08) {
                    actions.append((slot, .post(FleetPost(
                        at: slot, events: chunk, expectedAccepted: 0, expectedDuplicates: chunk.count,
                        isShuffled: shuffled))))
                    resends += 1
                } else if rng.chance(0.05) {
                    retryNextSlot = chunk
                }
                previousChunk = chunk
            }
        }
        for (index, release) in releases.enumerated() {
            actions.append((release.createdAt, .createRelease(index)))
            if let withdrawnAt = release.withdrawnAt { actions.append((withdrawnAt, .withdrawRelease(index))) }
        }
        for checkpoint in Self.checkpoints { actions.append((checkpoint, .checkpoint)) }
        // Stable: at equal times catalog writes, then posts (in slot order), then checkpoints.
        timeline = actions.enumerated().sorted { a, b in
            (a.element.at, a.element.action.order, a.offset) < (b.element.at, b.element.action.order, b.offset)
        }.map(\.element)
    }

    /// The events the server holds once every post up to `time` was made.
    func delivered(by time: Int64) -> [FleetEvent] {
        events.filter { $0.deliveredAt <= time }
    }

    /// The catalog as it stands at `time`.
    func releases(at time: Int64) -> [FleetRelease] {
        releases.filter { $0.createdAt <= time }
    }
}

// MARK: - One install's life

private struct InstallSimulation {
    enum Temper { case auto, prompted, never }

    let index: Int
    let platform: String
    let releases: [FleetRelease]
    var install: FleetInstall
    var events: [FleetEvent] = []

    let temper: Temper
    let launchProbability: Double
    let firstDay: Int64
    let lastDay: Int64
    let locale: String
    let initialOS: FleetVersion?
    let osUpgrade: (at: Int64, to: FleetVersion)?
    /// Offline: events made in [from, to) reach the server at `deliver`.
    let offline: (from: Int64, to: Int64, deliver: Int64)?

    var current: FleetVersion
    var lastAt: Int64 = 0
    var lastSoftPrompt: Int64 = .min / 2
    var skipped: Set<FleetVersion> = []
    var autoDelay: [FleetVersion: Int64] = [:]

    init(index: Int, platform: String, releases: [FleetRelease], rng: inout SplitMix64) {
        self.index = index
        self.platform = platform
        self.releases = releases.filter { $0.platform == platform }
        let os: FleetVersion?
        if platform == "ios" {
            os = rng.weighted([
                ("14.8.0", 0.02), ("15.8.0", 0.07), ("16.7.0", 0.16), ("17.6.0", 0.33), ("18.1.0", 0.36),
                ("26.0.0", 0.04), (nil, 0.02),
            ] as [(String?, Double)]).map(FleetVersion.init)
        } else {
            os = rng.weighted([("11.0.0", 0.15), ("13.0.0", 0.40), ("14.0.0", 0.43), (nil, 0.02)] as [(String?, Double)])
                .map(FleetVersion.init)
        }
        initialOS = os
        let upgrades: [String: String] = ["15.8.0": "16.7.0", "16.7.0": "17.6.0", "17.6.0": "18.1.0", "13.0.0": "14.0.0"]
        if let os, let next = upgrades[os.text], rng.chance(0.08) {
            osUpgrade = (Fleet.at(day: Int64(rng.int(3...55))) + rng.ms(0...(FleetTime.day - 1)), FleetVersion(next))
        } else {
            osUpgrade = nil
        }
        temper = rng.weighted([(Temper.auto, 0.35), (Temper.prompted, 0.50), (Temper.never, 0.15)])
        launchProbability = rng.weighted([(0.95, 0.25), (0.7, 0.25), (0.45, 0.2), (0.2, 0.2), (0.08, 0.1)])
        locale = rng.weighted([("en", 0.4), ("en-GB", 0.1), ("de-AT", 0.15), ("fr", 0.1), ("ja", 0.1), ("pt_BR", 0.15)])
        firstDay = rng.chance(0.8) ? 0 : Int64(rng.int(1...57))
        lastDay = rng.chance(0.1) ? Int64(rng.int(Int(firstDay)...59)) : Fleet.simulatedDays - 1
        let isTester = platform == "ios" && (os.map { $0 >= FleetVersion("17.0.0") } ?? false) && rng.chance(0.02)
        if rng.chance(0.08) {
            let from = Int64(rng.int(2...45))
            let to = min(from + Int64(rng.int(2...19)), Fleet.simulatedDays - 1)
            let start = Fleet.at(day: from) + rng.ms(0...(FleetTime.day - 1))
            let end = Fleet.at(day: to)
            offline = (start, end, end + rng.ms(0...(8 * FleetTime.hour)))
        } else {
            offline = nil
        }
        install = FleetInstall(id: rng.uuid(), platform: platform, isTester: isTester, isOffline: offline != nil)

        // The version on the device when the simulation (or the install's life) starts.
        let startTime = Fleet.at(day: firstDay)
        let available = self.releases.filter {
            $0.channel == "live" && $0.releasedAt <= startTime && !$0.isWithdrawn(at: startTime) && $0.admits(os: os)
        }.map(\.version).sorted()
        if firstDay == 0, available.count > 1, rng.chance(0.3) {
            current = available[available.count - 2]
        } else {
            current = available.last ?? self.releases[0].version
        }
    }

    func os(at time: Int64) -> FleetVersion? {
        if let osUpgrade, time >= osUpgrade.at { return osUpgrade.to }
        return initialOS
    }

    /// The newest release the store would install at `time` (testers: up to two days early, betas too).
    func storeRelease(at time: Int64, os: FleetVersion?) -> FleetRelease? {
        let early = install.isTester ? 2 * FleetTime.day : 0
        var best: FleetRelease?
        for release in releases
        where (release.channel == "live" || install.isTester) && release.releasedAt - early <= time
            && !release.isWithdrawn(at: time) && release.admits(os: os)
        {
            if best.map({ $0.version < release.version }) ?? true { best = release }
        }
        return best
    }

    /// The newest release the server's check would offer at `time` (it must be in the catalog).
    func offeredRelease(at time: Int64, os: FleetVersion?) -> FleetRelease? {
        var best: FleetRelease?
        for release in releases
        where release.channel == "live" && release.createdAt <= time && release.releasedAt <= time
            && !release.isWithdrawn(at: time) && release.admits(os: os)
        {
            if best.map({ $0.version < release.version }) ?? true { best = release }
        }
        return best
    }

    mutating func run(rng: inout SplitMix64) {
        for day in firstDay...lastDay {
            guard day == firstDay || rng.chance(launchProbability) else { continue }
            let sessions = 1 + (rng.chance(0.45) ? 1 : 0) + (rng.chance(0.15) ? 1 : 0)
            let times = (0..<sessions).map { _ in rng.ms(0...(FleetTime.day - 40 * FleetTime.minute)) }.sorted()
            for offset in times {
                let time = max(Fleet.at(day: day) + offset, lastAt + FleetTime.second + rng.ms(0...999))
                session(at: time, rng: &rng)
            }
        }
    }

    /// Emits an event `delay` after the install's previous one (or at `time`), on the current version.
    private mutating func emit(
        _ type: String, at time: Int64? = nil, after delay: ClosedRange<Int64> = 300...3_000, os: FleetVersion?,
        into batch: inout [FleetEvent], rng: inout SplitMix64, kind: String? = nil, target: FleetVersion? = nil,
        dismiss: String? = nil, from: FleetVersion? = nil
    ) {
        let occurredAt = time ?? lastAt + rng.ms(delay)
        precondition(occurredAt > lastAt, "one install's events never share a time")
        lastAt = occurredAt
        batch.append(FleetEvent(
            id: rng.uuid(), type: type, occurredAt: occurredAt, install: index, platform: platform, version: current,
            os: os, locale: locale, promptKind: kind, target: target, dismissAction: dismiss, from: from))
    }

    private mutating func update(
        to version: FleetVersion, at time: Int64? = nil, after delay: ClosedRange<Int64> = 300...3_000,
        os: FleetVersion?, into batch: inout [FleetEvent], rng: inout SplitMix64, whatsNew: Double
    ) {
        precondition(version > current, "installs never downgrade")
        let from = current
        current = version
        emit("updated", at: time, after: delay, os: os, into: &batch, rng: &rng, from: from)
        if rng.chance(whatsNew) { emit("whats_new_shown", after: 800...4_000, os: os, into: &batch, rng: &rng) }
    }

    /// The chance that a session of `version` ends abnormally: iOS 1.4.0 on iOS 17 is a bad release.
    func abnormalExitChance(_ version: FleetVersion, os: FleetVersion?) -> Double {
        platform == "ios" && version == FleetVersion("1.4.0") && os.map { $0.parts.first == 17 } == true ? 0.12 : 0.03
    }

    private mutating func session(at sessionStart: Int64, rng: inout SplitMix64) {
        let os = os(at: sessionStart)
        let isOffline = offline.map { sessionStart >= $0.from && sessionStart < $0.to } ?? false
        var batch: [FleetEvent] = []

        // 0. The SDK reports at launch that the previous session (of the version it ran) ended abnormally.
        var start = sessionStart
        if lastAt > 0, rng.chance(abnormalExitChance(current, os: os)) {
            emit("abnormal_exit", at: start, os: os, into: &batch, rng: &rng)
            start += 1 + rng.ms(0...999)
        }

        // 1. The store may have installed a newer version since the last launch.
        var storeUpdate: FleetVersion?
        if !isOffline, let release = storeRelease(at: start, os: os), release.version > current {
            if install.isTester {
                storeUpdate = release.version
            } else if temper == .auto {
                let delay: Int64
                if let known = autoDelay[release.version] {
                    delay = known
                } else {
                    delay =
                        rng.exponential(meanMs: 1.2 * Double(FleetTime.day))
                        + (rng.chance(0.1) ? rng.ms((3 * FleetTime.day)...(15 * FleetTime.day)) : 0)
                    autoDelay[release.version] = delay
                }
                if start >= release.releasedAt + delay { storeUpdate = release.version }
            }
        }
        if let storeUpdate {
            update(to: storeUpdate, at: start, os: os, into: &batch, rng: &rng, whatsNew: 0.5)
        } else {
            emit("launched", at: start, os: os, into: &batch, rng: &rng)
        }

        // 2. The update prompt, as the check would answer (testers and offline devices see none).
        if !isOffline, !install.isTester, let offer = offeredRelease(at: start, os: os), offer.version > current {
            let target = offer.version
            if let minimum = Fleet.enforcedMinimum(platform: platform, at: start), current < minimum, target >= minimum {
                emit("prompt_shown", os: os, into: &batch, rng: &rng, kind: "force", target: target)
                if rng.chance(temper == .never ? 0.15 : 0.7) {
                    emit(
                        "update_started", after: 2_000...20_000, os: os, into: &batch, rng: &rng, kind: "force",
                        target: target)
                    if rng.chance(0.9) {
                        update(
                            to: target, after: FleetTime.minute...(15 * FleetTime.minute), os: os, into: &batch,
                            rng: &rng, whatsNew: 0.4)
                    }
                } else {
                    emit("blocked", after: 1_000...5_000, os: os, into: &batch, rng: &rng, target: target)
                }
            } else if start - offer.releasedAt >= FleetTime.day, !skipped.contains(target),
                start - lastSoftPrompt >= 20 * FleetTime.hour
            {
                lastSoftPrompt = start
                emit("prompt_shown", os: os, into: &batch, rng: &rng, kind: "soft", target: target)
                let outcome: String =
                    switch temper {
                    case .auto: rng.weighted([("later", 0.6), ("skip", 0.05), ("update", 0.35)])
                    case .prompted: rng.weighted([("later", 0.4), ("skip", 0.15), ("update", 0.45)])
                    case .never: rng.weighted([("later", 0.65), ("skip", 0.35)])
                    }
                switch outcome {
                case "update":
                    emit(
                        "update_started", after: 1_000...30_000, os: os, into: &batch, rng: &rng, kind: "soft",
                        target: target)
                    if rng.chance(0.85) {
                        update(
                            to: target, after: FleetTime.minute...(15 * FleetTime.minute), os: os, into: &batch,
                            rng: &rng, whatsNew: 0.5)
                    }
                default:
                    if outcome == "skip" { skipped.insert(target) }
                    emit(
                        "prompt_dismissed", after: 1_000...30_000, os: os, into: &batch, rng: &rng, kind: "soft",
                        target: target, dismiss: outcome)
                }
            }
        }

        // 3. Delivery: offline devices post when back online; others a little after the session, some a day later.
        let deliveredAt: Int64
        if isOffline, let offline {
            deliveredAt = offline.deliver
        } else {
            deliveredAt =
                lastAt
                + rng.weighted([
                    (rng.ms((10 * FleetTime.second)...(30 * FleetTime.minute)), 0.75),
                    (rng.ms((30 * FleetTime.minute)...(8 * FleetTime.hour)), 0.17),
                    (rng.ms((8 * FleetTime.hour)...(30 * FleetTime.hour)), 0.08),
                ])
        }
        for var event in batch {
            event.deliveredAt = deliveredAt
            events.append(event)
        }
    }
}
