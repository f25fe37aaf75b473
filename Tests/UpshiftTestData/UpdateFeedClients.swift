import Foundation

/// What a client decides from its feed: nothing, an update it may decline, or one it must take.
public enum ClientOutcome: String, Sendable, Equatable, CustomStringConvertible {
    case none, soft, force
    /// The client refused the whole feed (it then shows nothing and reports an error).
    case rejected

    public var description: String { rawValue }
}

/// Sparkle 2's reading of an appcast, in this project's words, from its sources:
/// - `SUAppcastItem.m`: an item's version is the enclosure's `sparkle:version`, else the `<sparkle:version>`
///   element; a `<link>` counts only with an http(s) scheme; an item with neither an enclosure nor such a
///   link fails, and with it the whole appcast (`SUAppcast.m`); the critical mark is the
///   `<sparkle:criticalUpdate>` element, else (legacy) `<sparkle:criticalUpdate/>` among `<sparkle:tags>`.
/// - `SUAppcastDriver.m`: candidates are the items whose channel is unset or allowed, whose OS bounds admit
///   the host and whose `sparkle:os` is absent or `macos`; the best is the highest version, the first of
///   equals winning; it is an update when the host's version is below it.
/// - `SPUAppcastItemStateResolver.m`: critical without a `sparkle:version` attribute, else while the host's
///   version is below that attribute.
/// - `SUStandardVersionComparator.m`: the version order (``compare(_:_:)``).
public enum SparkleClient {
    public struct Host: Sendable {
        /// `CFBundleVersion`: the build on macOS.
        public var version: String
        public var os: String
        public var allowedChannels: Set<String>

        public init(version: String, os: String, allowedChannels: Set<String> = []) {
            self.version = version
            self.os = os
            self.allowedChannels = allowedChannels
        }
    }

    public struct Item {
        public var version: String
        public var channel: String?
        public var os: String?
        public var minimumSystemVersion: String?
        public var maximumSystemVersion: String?
        /// nil: no critical mark; `.some(nil)`: critical for every host; `.some(v)`: for hosts below v.
        public var critical: String??
    }

    /// The items, or nil when Sparkle refuses the appcast.
    public static func items(_ xml: String) -> [Item]? {
        guard let root = try? XMLTree.parse(xml), let channel = root.child("channel") else { return nil }
        var items: [Item] = []
        for element in channel.children("item") {
            let enclosure = element.child("enclosure")
            guard let version = enclosure?.attributes["sparkle:version"] ?? element.child("sparkle:version")?.text else {
                return nil
            }
            let link = element.child("link").map(\.text).flatMap { URL(string: $0) }
            let webLink = link?.scheme.map { ["http", "https"].contains($0.lowercased()) } ?? false
            guard enclosure != nil || webLink else { return nil }
            var critical: String??
            if let mark = element.child("sparkle:criticalUpdate") {
                critical = .some(mark.attributes["sparkle:version"])
            } else if element.child("sparkle:tags")?.child("sparkle:criticalUpdate") != nil {
                critical = .some(nil)
            }
            items.append(
                Item(
                    version: version, channel: element.child("sparkle:channel")?.text, os: enclosure?.attributes["sparkle:os"],
                    minimumSystemVersion: element.child("sparkle:minimumSystemVersion")?.text,
                    maximumSystemVersion: element.child("sparkle:maximumSystemVersion")?.text, critical: critical))
        }
        return items
    }

    public static func outcome(_ xml: String, host: Host) -> ClientOutcome {
        guard let items = items(xml) else { return .rejected }
        let supported = items.filter { item in
            (item.channel == nil || host.allowedChannels.contains(item.channel!))
                && (item.os == nil || item.os == "macos")
                && (item.minimumSystemVersion.map { compare($0, host.os) != .orderedDescending } ?? true)
                && (item.maximumSystemVersion.map { compare($0, host.os) != .orderedAscending } ?? true)
        }
        var best: Item?
        for item in supported where best == nil || compare(best!.version, item.version) == .orderedAscending {
            best = item
        }
        guard let best, compare(host.version, best.version) == .orderedAscending else { return .none }
        switch best.critical {
        case nil: return .soft
        case .some(nil): return .force
        case .some(let below?): return compare(host.version, below) == .orderedAscending ? .force : .soft
        }
    }

    private enum Kind: Equatable { case number, string, period, punctuation, whitespace, dash }

    private static func kind(_ character: Character) -> Kind {
        if character == "." { return .period }
        if character == "-" { return .dash }
        if character.unicodeScalars.first.map(CharacterSet.decimalDigits.contains) == true { return .number }
        if character.unicodeScalars.first.map(CharacterSet.whitespacesAndNewlines.contains) == true { return .whitespace }
        if character.unicodeScalars.first.map(CharacterSet.punctuationCharacters.contains) == true { return .punctuation }
        return .string
    }

    private static func isSeparator(_ kind: Kind) -> Bool { [.period, .punctuation, .whitespace].contains(kind) }

    /// Runs of one kind; a separator is a part of its own; everything from the first `-` is dropped.
    private static func parts(_ version: String) -> [String] {
        var parts: [String] = []
        var current = ""
        var previous: Kind?
        for character in version {
            let next = kind(character)
            if previous != nil, next == .dash { break }
            if let previous, previous != next || isSeparator(previous) {
                parts.append(current)
                current = ""
            }
            current.append(character)
            previous = next
        }
        if !current.isEmpty { parts.append(current) }
        return parts
    }

    /// `SUStandardVersionComparator`: split into runs, pad the shorter's leading numbers and periods to the
    /// longer's (so `1.0` equals `1.0.0`), compare numbers numerically and strings as strings; a number beats
    /// a string and a period; past the common length a string part makes the longer version older.
    public static func compare(_ a: String, _ b: String) -> ComparisonResult {
        var partsA = parts(a)
        var partsB = parts(b)
        func leading(_ parts: [String]) -> Int {
            parts.prefix { [.number, .period].contains(kind($0.first!)) }.count
        }
        let (countA, countB) = (leading(partsA), leading(partsB))
        if countA > countB {
            for index in countB..<countA { partsB.insert(kind(partsA[index].first!) == .period ? "." : "0", at: index) }
        } else if countB > countA {
            for index in countA..<countB { partsA.insert(kind(partsB[index].first!) == .period ? "." : "0", at: index) }
        }
        for (partA, partB) in zip(partsA, partsB) {
            let (kindA, kindB) = (kind(partA.first!), kind(partB.first!))
            if kindA == kindB || (isSeparator(kindA) && isSeparator(kindB)) {
                if kindA == .number {
                    let (valueA, valueB) = (Int64(partA) ?? .max, Int64(partB) ?? .max)
                    if valueA != valueB { return valueA < valueB ? .orderedAscending : .orderedDescending }
                } else if kindA == .string, partA != partB {
                    return partA < partB ? .orderedAscending : .orderedDescending
                }
            } else if kindA != .string, kindB == .string {
                return .orderedDescending
            } else if kindA == .string, kindB != .string {
                return .orderedAscending
            } else {
                return kindA == .number ? .orderedDescending : .orderedAscending
            }
        }
        guard partsA.count != partsB.count else { return .orderedSame }
        let longerIsA = partsA.count > partsB.count
        let missing = longerIsA ? partsA[partsB.count] : partsB[partsA.count]
        let longerWins = kind(missing.first!) != .string
        return longerIsA == longerWins ? .orderedDescending : .orderedAscending
    }
}

/// upgrader's (Flutter) decision, in this project's words, from its sources:
/// - `appcast.dart`: an item's version is the `<sparkle:version>` element, else the enclosure's attribute
///   (no version: no item); `sparkle:os` must be absent or name the platform; only `<sparkle:tags>`
///   holding `<sparkle:criticalUpdate/>` marks an item critical; the best (and the best critical) item is
///   the highest version, the first of equals winning.
/// - `upgrade_store_controller.dart`: from the appcast, critical when the installed version is below the
///   best critical item; Update opens the best item's enclosure URL. From the lookup
///   (`itunes_search_api.dart`): the first result's `version`, `trackViewUrl`, and `[:mav: V]` in its
///   description.
/// - `upgrader.dart`: nothing unless the store's version is above the installed one; then blocked (force)
///   when below the minimum app version or critical, else a prompt the user may decline.
/// - package:version: ``DartVersion``.
public enum UpgraderClient {
    public struct Decision: Equatable {
        public var outcome: ClientOutcome
        /// What Update opens.
        public var updateURL: String?

        public init(outcome: ClientOutcome, updateURL: String?) {
            self.outcome = outcome
            self.updateURL = updateURL
        }
    }

    /// package:version's `Version.parse`: digits and periods (only the first three numbers kept), then an
    /// optional `-pre.release` and `+build`; the order is major, minor, patch, then a version without a
    /// pre-release above one with, identifiers compared as numbers when both are numeric.
    public struct DartVersion: Comparable {
        public var numbers: [Int]
        public var preRelease: [String]

        public init?(_ text: String) {
            // ^([\d.]+)(-([0-9A-Za-z\-.]+))?(\+([0-9A-Za-z\-.]+))?$, matched by hand.
            let identifier = { (c: Character) in c.isASCII && (c.isLetter || c.isNumber || c == "-" || c == ".") }
            var rest = Substring(text)
            if let plus = rest.firstIndex(of: "+") {
                let build = rest[rest.index(after: plus)...]
                guard !build.isEmpty, build.allSatisfy(identifier) else { return nil }
                rest = rest[..<plus]
            }
            var pre: Substring?
            if let dash = rest.firstIndex(of: "-") {
                pre = rest[rest.index(after: dash)...]
                guard !pre!.isEmpty, pre!.allSatisfy(identifier) else { return nil }
                rest = rest[..<dash]
            }
            guard !rest.isEmpty, rest.allSatisfy({ $0 == "." || ($0.isASCII && $0.isNumber) }) else { return nil }
            var numbers: [Int] = []
            for part in rest.split(separator: ".", omittingEmptySubsequences: false).prefix(3) {
                guard let value = Int(part) else { return nil }  // Dart's int.parse("") throws
                numbers.append(value)
            }
            self.numbers = numbers + Array(repeating: 0, count: 3 - numbers.count)
            preRelease = pre.map { $0.split(separator: ".", omittingEmptySubsequences: false).map(String.init) } ?? []
        }

        public static func < (a: DartVersion, b: DartVersion) -> Bool { order(a, b) < 0 }
        public static func == (a: DartVersion, b: DartVersion) -> Bool { order(a, b) == 0 }

        static func order(_ a: DartVersion, _ b: DartVersion) -> Int {
            for (x, y) in zip(a.numbers, b.numbers) where x != y { return x < y ? -1 : 1 }
            switch (a.preRelease.isEmpty, b.preRelease.isEmpty) {
            case (true, true): return 0
            case (true, false): return 1
            case (false, true): return -1
            case (false, false): break
            }
            for index in 0..<max(a.preRelease.count, b.preRelease.count) {
                if b.preRelease.count <= index { return 1 }
                if a.preRelease.count <= index { return -1 }
                let (x, y) = (a.preRelease[index], b.preRelease[index])
                if x == y { continue }
                switch (Double(x), Double(y)) {
                case let (p?, q?): return p > q ? 1 : -1
                case (nil, _?): return 1
                case (_?, nil): return -1
                case (nil, nil): return x < y ? -1 : 1
                }
            }
            return 0
        }
    }

    struct Item {
        var version: String
        var os: String?
        var fileURL: String?
        var critical: Bool
    }

    static func items(_ xml: String) -> [Item] {
        guard let root = try? XMLTree.parse(xml) else { return [] }
        var items: [Item] = []
        func collect(_ element: XMLTree.Element) {
            if element.name == "item" {
                let enclosure = element.child("enclosure")
                let version = element.child("sparkle:version")?.text ?? enclosure?.attributes["sparkle:version"]
                if let version, !version.isEmpty {
                    items.append(
                        Item(
                            version: version, os: enclosure?.attributes["sparkle:os"], fileURL: enclosure?.attributes["url"],
                            critical: element.child("sparkle:tags")?.child("sparkle:criticalUpdate") != nil))
                }
            }
            element.children.forEach(collect)
        }
        collect(root)
        return items
    }

    /// The highest version among `items` that parse, the first of equals winning.
    static func best(_ items: [Item]) -> Item? {
        var best: Item?
        for item in items {
            guard let current = best else {
                best = item
                continue
            }
            if let version = DartVersion(item.version), let bestVersion = DartVersion(current.version), version > bestVersion {
                best = item
            }
        }
        return best
    }

    static func decide(installed: String, storeVersion: String?, minimum: DartVersion?, critical: Bool, url: String?)
        -> Decision
    {
        guard let installedVersion = DartVersion(installed), let store = storeVersion.flatMap(DartVersion.init),
            store > installedVersion
        else { return Decision(outcome: .none, updateURL: nil) }
        let below = minimum.map { installedVersion < $0 } ?? false
        return Decision(outcome: below || critical ? .force : .soft, updateURL: url)
    }

    /// `UpgraderAppcastStore` on `platform` (`ios`, `android`), without the device's OS version.
    public static func appcast(_ xml: String, platform: String, installed: String) -> Decision {
        let supported = items(xml).filter { $0.os.map { $0.isEmpty || $0.lowercased() == platform.lowercased() } ?? true }
        let best = best(supported)
        let criticalItem = Self.best(supported.filter(\.critical))
        let critical = criticalItem.flatMap { DartVersion($0.version) }.map { installed < $0 } ?? false
        return decide(installed: installed, storeVersion: best?.version, minimum: nil, critical: critical, url: best?.fileURL)
    }

    /// `[:mav: V]` in a description (`\[\:mav\:[\s]*(?<version>[^\s]+)[\s]*\]`, any case), V as package:version reads it.
    public static func minimumAppVersion(_ description: String) -> DartVersion? {
        guard let start = description.range(of: "[:mav:", options: .caseInsensitive) else { return nil }
        let rest = description[start.upperBound...].drop { $0.isWhitespace }
        let token = rest.prefix { !$0.isWhitespace }
        // [^\s]+ is greedy, then backtracks to leave the closing bracket.
        if token.hasSuffix("]"), token.count > 1 { return DartVersion(String(token.dropLast())) }
        guard rest.dropFirst(token.count).drop(while: { $0.isWhitespace }).first == "]" else { return nil }
        return DartVersion(String(token))
    }

    /// `UpgraderAppStore` reading the lookup's JSON (the fields `ITunesResults` reads of the first result).
    public static func lookup(_ json: Data, installed: String) -> Decision {
        struct Answer: Decodable {
            struct Result: Decodable {
                var version: String?
                var trackViewUrl: String?
                var description: String?
            }
            var results: [Result]
        }
        guard let result = (try? JSONDecoder().decode(Answer.self, from: json))?.results.first else {
            return Decision(outcome: .none, updateURL: nil)
        }
        return decide(
            installed: installed, storeVersion: result.version, minimum: minimumAppVersion(result.description ?? ""),
            critical: false, url: result.trackViewUrl)
    }
}

private func < (installed: String, version: UpgraderClient.DartVersion) -> Bool {
    UpgraderClient.DartVersion(installed).map { $0 < version } ?? false
}
