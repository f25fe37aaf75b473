import Foundation
import Testing
import UpshiftCore
import UpshiftTestData

/// What each client decides from its feed equals what the check decides (docs/CLIENTS.md, "What each client decides, and where it differs from the check"), asked
/// of the clients' own rules (``SparkleClient``, ``UpgraderClient``), except in the cases docs/CLIENTS.md
/// names, each only in its documented direction.
@Suite struct UpdateFeedClientsTests {
    static let now = Timestamp.parse("2026-06-01T12:00:00Z")!

    static func day(_ offset: Double) -> Date { now.addingTimeInterval(offset * 86_400) }

    /// A case the docs name: the feed may differ from the check here, in this direction only.
    enum Excuse: String, CaseIterable, CustomStringConvertible {
        /// `versionsBehindThreshold` above 1: the feed says soft where the check says none.
        case versionsBehind
        /// Installed at or above `targetVersion`: soft where the check says none.
        case targetVersion
        /// A blocked installed version: soft or none where the check forces.
        case blockedInstalled
        /// Installed in [M, L) where the format can name only a listed release: force where the check says soft.
        case belowListedMinimum
        /// A force only a release the feed cannot list satisfies or sets off (a staged, paused or too recent
        /// one): soft or none where the check forces.
        case unlistedForce
        /// upgrader: a version with a part past the third or a pre-release (package:version's order).
        case upgraderVersions

        var description: String { rawValue }

        /// (client, check) pairs this case allows besides equality.
        var allowed: Set<[ClientOutcome]> {
            switch self {
            case .versionsBehind, .targetVersion: [[.soft, .none]]
            case .blockedInstalled, .unlistedForce: [[.soft, .force], [.none, .force]]
            case .belowListedMinimum: [[.force, .soft]]
            case .upgraderVersions: Set([ClientOutcome.none, .soft, .force].flatMap { a in [ClientOutcome.none, .soft, .force].map { [a, $0] } })
            }
        }
    }

    enum Client: String, CaseIterable {
        case sparkle, upgraderAppcast, upgraderLookup
    }

    // MARK: the catalogs

    struct Round {
        var catalog: AppCatalog
        var platform: Platform
        var channel: Channel
        var hostOS: Version?
    }

    /// A version just above `version` that no catalog here names (a fourth or later part).
    static func above(_ version: Version) -> Version {
        // A pre-release with one more identifier ranks above it and below the next (SemVer 2.0 §11).
        if !version.prerelease.isEmpty, let next = Version(version.text + ".1") { return next }
        var parts = version.components
        if parts.count < Version.maximumComponentCount {
            parts += Array(repeating: 0, count: Version.maximumComponentCount - 1 - parts.count) + [1]
        } else {
            parts[parts.count - 1] += 1
        }
        return Version(parts.map(String.init).joined(separator: "."))!
    }

    /// A version just below `version` and above every version of fewer parts below it.
    static func below(_ version: Version) -> Version? {
        var parts = version.components
        guard let last = parts.lastIndex(where: { $0 > 0 }) else { return nil }
        parts[last] -= 1
        parts = Array(parts.prefix(last + 1)) + [Version.maximumComponent]
        return Version(parts.prefix(Version.maximumComponentCount).map(String.init).joined(separator: "."))
    }

    static func round(_ generator: inout SplitMix64, index: Int) -> Round {
        let platform: Platform = ["macos", "macos", "ios", "ios", "android"][index % 5]
        let channel: Channel = generator.unit() < 0.7 ? .live : .beta
        // Versions ascending: two to four parts, small numbers, sometimes a pre-release (beta channel only).
        var versions: [Version] = []
        var major = generator.int(1...3)
        for _ in 0..<generator.int(2...7) {
            major += generator.int(0...1)
            var parts = [major, generator.int(0...9)]
            if generator.unit() < 0.3 { parts.append(generator.int(0...9)) }
            if generator.unit() < 0.1 { parts.append(generator.int(1...9)) }
            var text = parts.map(String.init).joined(separator: ".")
            if generator.unit() < 0.12 { text += "-rc.\(generator.int(1...3))" }
            guard let version = Version(text), versions.allSatisfy({ $0 < version }) else { continue }
            versions.append(version)
        }
        // macOS: builds increasing with versions, three apart at least.
        var build = generator.int(10...99)
        var minimumOS = generator.int(10...12)
        let capped = generator.unit() < 0.25 ? generator.int(1...2) : 0  // the newest releases top out at 13.x
        // Newer versions are younger, as releases go; some are not out yet.
        let ages = versions.map { _ in Double(generator.int(0...60)) + generator.unit() }.sorted(by: >)
        var releases: [Release] = []
        for (position, version) in versions.enumerated() {
            build += generator.int(3...50)
            if generator.unit() < 0.3 { minimumOS += 1 }
            let age = generator.unit() < 0.08 ? -1 : ages[position]
            var release = Release(
                platform: platform, version: version, build: platform == "macos" ? build : nil, releasedAt: day(-age),
                channel: !version.prerelease.isEmpty || generator.unit() < 0.12 ? .beta : .live,
                minimumOSVersion: Version("\(minimumOS).0"))
            if position >= versions.count - capped { release.maximumOSVersion = Version("13.9") }
            if generator.unit() < 0.5 { release.downloadURL = "https://example.com/\(version.text).zip" }
            if generator.unit() < 0.07 { release.status = .withdrawn }
            if generator.unit() < 0.22 { release.rolloutPercent = Double(generator.int(1...99)) }
            if generator.unit() < 0.06 { release.rolloutPaused = true }
            releases.append(release)
        }
        var policy = Policy(enabled: generator.unit() < 0.97)
        let listedVersions = versions
        func someVersion() -> Version {
            let pick = generator.int(0...3)
            if pick == 0 || listedVersions.isEmpty { return Version("\(generator.int(1...9)).\(generator.int(0...9))")! }
            let base = listedVersions[generator.int(0...(listedVersions.count - 1))]
            return pick == 1 ? base : pick == 2 ? above(base) : (below(base) ?? base)
        }
        if generator.unit() < 0.6 {
            // A third of the minimums lie above every release: unreachable.
            policy.minimumVersion = generator.unit() < 0.33 ? Version("\((versions.last?.components.first ?? 1) + 1).5") : someVersion()
        }
        if generator.unit() < 0.12, let newest = releases.indices.last {
            // A minimum raised with a staged release: only a release no feed lists reaches it.
            releases[newest].rolloutPercent = Double(generator.int(1...99))
            policy.minimumVersion = releases[newest].version
        }
        if generator.unit() < 0.8 { policy.blockAfterDays = Double(generator.int(1...20)) }
        if generator.unit() < 0.35 { policy.notifyAfterDays = Double(generator.int(0...8)) }
        if generator.unit() < 0.15 { policy.versionsBehindThreshold = 2 }
        if generator.unit() < 0.15 { policy.targetVersion = someVersion() }
        if generator.unit() < 0.15 { policy.blockedVersions = [someVersion()] }
        let app = AppInfo(
            id: "round", name: "Round \(index)", defaultLocale: "en",
            updateURL: ["macos": "https://example.com/mac", "ios": "itms-apps://apps.apple.com/app/id42",
                        "android": "https://play.google.com/store/apps/details?id=x"],
            storeId: ["ios": "42"], bundleId: ["ios": "com.example.round"])
        return Round(
            catalog: AppCatalog(app: app, releases: releases, policies: [platform: policy]), platform: platform,
            channel: channel,
            hostOS: platform == "macos" ? Version(["10.15", "11.0", "12.5", "13.0", "14.2", "15.1"][generator.int(0...5)]) : nil)
    }

    /// Every installed version in range: each release, just above and below it, the minimum and its
    /// neighbours, and beyond both ends. On macOS each comes with its build: each listed build, build ± 1.
    static func installs(_ round: Round) -> [(version: Version, build: Int?)] {
        let releases = round.catalog.releases(for: round.platform).sorted { $0.version < $1.version }
        if round.platform == "macos" {
            var installs: [(Version, Int?)] = []
            for (index, release) in releases.enumerated() {
                guard let build = release.build else { continue }
                installs.append((release.version, build))
                installs.append((above(release.version), build + 1))
                // Just below, but above the release before (whose build is further below).
                let previous = index > 0 ? releases[index - 1].version : nil
                if let below = below(release.version), previous.map({ below > $0 }) ?? true {
                    installs.append((below, build - 1))
                } else if let previous {
                    installs.append((above(previous), build - 1))
                }
            }
            if let last = releases.last, let build = last.build { installs.append((above(above(last.version)), build + 10)) }
            return installs
        }
        var versions = releases.flatMap { [$0.version, above($0.version)] + [below($0.version)].compactMap { $0 } }
        if let minimum = round.catalog.policy(for: round.platform).minimumVersion {
            versions += [minimum, above(minimum)] + [below(minimum)].compactMap { $0 }
        }
        versions.append(Version("0.1")!)
        if let last = releases.last { versions.append(above(above(last.version))) }
        return versions.map { ($0, nil) }
    }

    // MARK: what excuses a case (never the outcome)

    static func excuses(
        _ round: Round, installed: Version, client: Client, items: [Release], feed: UpdateFeedView
    ) -> Set<Excuse> {
        let policy = round.catalog.policy(for: round.platform)
        var excuses: Set<Excuse> = []
        guard policy.enabled else { return excuses }
        if policy.versionsBehindThreshold > 1 { excuses.insert(.versionsBehind) }
        if let target = policy.targetVersion, installed >= target { excuses.insert(.targetVersion) }
        if policy.isBlocked(installed) { excuses.insert(.blockedInstalled) }
        if client != .upgraderLookup, let minimum = policy.minimumVersion, let listed = feed.minimumTarget(among: items),
            installed >= minimum, installed < listed.version
        {
            excuses.insert(.belowListedMinimum)
        }
        if client != .sparkle {
            let versions = round.catalog.releases(for: round.platform).map(\.version)
                + [installed, policy.minimumVersion, policy.targetVersion].compactMap { $0 } + policy.blockedVersions
            if versions.contains(where: { $0.components.count > 3 || !$0.prerelease.isEmpty }) {
                excuses.insert(.upgraderVersions)
            }
        }
        // A force that only unlisted releases carry: candidates the host can run that the feed does not list.
        let listed = Set(items.map(\.version))
        let candidates = round.catalog.releases(for: round.platform).filter { release in
            release.status == .live && release.releasedAt <= now && release.version > installed
                && (round.channel == .beta || release.channel == .live) && !policy.isBlocked(release.version)
                && DecisionEngine.isCompatible(release, os: round.hostOS)
        }
        let unlisted = candidates.filter { !listed.contains($0.version) }
        let listedCandidates = candidates.filter { listed.contains($0.version) }
        if let minimum = policy.minimumVersion, installed < minimum,
            unlisted.contains(where: { $0.version >= minimum }), !listedCandidates.contains(where: { $0.version >= minimum })
        {
            excuses.insert(.unlistedForce)
        }
        if let days = policy.blockAfterDays {
            func overdue(_ release: Release) -> Bool {
                now.timeIntervalSince(release.releasedAt) >= days * 86_400 && release.rolloutPercent >= 100 && !release.rolloutPaused
            }
            if unlisted.contains(where: overdue), !listedCandidates.contains(where: overdue) { excuses.insert(.unlistedForce) }
        }
        return excuses
    }

    /// Whether the excuses lead from what the client decided to what the check did, one step each (two
    /// cases may hold at once: installed in [M, L) and a threshold of 2 is force where the check says none).
    static func excused(_ client: ClientOutcome, _ check: ClientOutcome, by excuses: Set<Excuse>) -> Bool {
        var reached: Set<ClientOutcome> = [client]
        for _ in excuses {
            for excuse in excuses {
                for pair in excuse.allowed where reached.contains(pair[0]) { reached.insert(pair[1]) }
            }
        }
        return reached.contains(check)
    }

    // MARK: the property

    @Test func eachClientDecidesAsTheCheckDoes() throws {
        var generator = SplitMix64(seed: 37)
        let rounds = 2_000
        var asked: [Client: Int] = [:]
        var agreedForce: [Client: Int] = [:]
        var excusedRounds: [Excuse: Int] = [:]
        var (overdueNotNewest, unreachableMinimum, cases, failures) = (0, 0, 0, 0)
        for index in 0..<rounds {
            let round = Self.round(&generator, index: index)
            let feed = UpdateFeedView(round.catalog, platform: round.platform, channel: round.channel, now: Self.now)
            let items = Appcast.items(feed)
            let appcast = Appcast.render(feed, locale: nil)
            let lookup = try JSONEncoder().encode(AppStoreLookup.answer(feed, locale: nil))
            let policy = feed.policy
            if policy.enabled, policy.minimumVersion != nil, feed.minimumTarget(among: feed.releases) == nil {
                unreachableMinimum += 1
            }
            let clients: [Client] = switch round.platform {
            case "macos": [.sparkle]
            case "ios": round.channel == .live ? [.upgraderAppcast, .upgraderLookup] : [.upgraderAppcast]
            default: [.upgraderAppcast]
            }
            var roundAgreed: Set<Client> = []
            var roundExcuses: Set<Excuse> = []
            var roundOverdue = false
            for client in clients { asked[client, default: 0] += 1 }
            for (installed, build) in Self.installs(round) {
                let request = CheckRequest(
                    platform: round.platform, version: installed, build: build, os: round.hostOS, channel: round.channel)
                let check = DecisionEngine.decide(request, catalog: round.catalog, now: Self.now)
                let expected: ClientOutcome = switch check.action {
                case .none: .none
                case .soft: .soft
                case .force: .force
                }
                if check.reason == .releaseOverdue, let newest = feed.releases.first,
                    let x = feed.releases.first(where: { feed.overdue.contains($0.version) }), x.version != newest.version
                {
                    roundOverdue = true
                }
                for client in clients {
                    cases += 1
                    let decided: ClientOutcome
                    var updateURL: String?
                    switch client {
                    case .sparkle:
                        let host = SparkleClient.Host(
                            version: String(build!), os: round.hostOS!.text,
                            allowedChannels: round.channel == .beta ? ["beta"] : [])
                        decided = SparkleClient.outcome(appcast, host: host)
                    case .upgraderAppcast:
                        let decision = UpgraderClient.appcast(appcast, platform: round.platform.rawValue, installed: installed.text)
                        (decided, updateURL) = (decision.outcome, decision.updateURL)
                    case .upgraderLookup:
                        let decision = UpgraderClient.lookup(lookup, installed: installed.text)
                        (decided, updateURL) = (decision.outcome, decision.updateURL)
                    }
                    if client != .sparkle, decided != .none {
                        #expect(updateURL != nil, "round \(index) \(client): upgrader's Update leads nowhere")
                    }
                    if decided == .force, expected == .force { roundAgreed.insert(client) }
                    let excuses = Self.excuses(round, installed: installed, client: client, items: items, feed: feed)
                    roundExcuses.formUnion(excuses)
                    guard decided != expected else { continue }
                    if !Self.excused(decided, expected, by: excuses) {
                        failures += 1
                        if failures <= 10 {
                            Issue.record(
                                """
                                round \(index) \(client) \(round.platform) \(round.channel) os \(round.hostOS?.text ?? "-"): \
                                installed \(installed.text) build \(build.map(String.init) ?? "-"): client \(decided), \
                                check \(check.action) \(check.reason) \(check.latestVersion ?? "-"); excused by \(excuses)
                                policy \(policy)
                                releases \(round.catalog.releases(for: round.platform).map { "\($0.version.text)/\($0.build.map(String.init) ?? "-") \($0.channel) \($0.status) \($0.rolloutPercent)% paused \($0.rolloutPaused) age \(Self.now.timeIntervalSince($0.releasedAt) / 86_400) os \($0.minimumOSVersion?.text ?? "-")…\($0.maximumOSVersion?.text ?? "-")" })
                                \(client == .upgraderLookup ? String(decoding: lookup, as: UTF8.self) : appcast)
                                """)
                        }
                    }
                }
            }
            for client in roundAgreed { agreedForce[client, default: 0] += 1 }
            for excuse in roundExcuses { excusedRounds[excuse, default: 0] += 1 }
            if roundOverdue { overdueNotNewest += 1 }
        }
        #expect(failures == 0, "\(failures) of \(cases) cases differ from the check")
        // What the rounds covered, so that the property cannot hold on easy catalogs.
        func share(_ count: Int, _ total: Int) -> Double { Double(count) / Double(max(total, 1)) }
        #expect(share(overdueNotNewest, rounds) >= 0.10, "forced by an overdue release that is not the newest: \(overdueNotNewest)")
        #expect(share(unreachableMinimum, rounds) >= 0.10, "an unreachable minimum: \(unreachableMinimum)")
        for client in Client.allCases {
            #expect(share(agreedForce[client] ?? 0, asked[client] ?? 0) >= 0.10,
                    "\(client) agreed on force in \(agreedForce[client] ?? 0) of \(asked[client] ?? 0) rounds")
        }
        for excuse in Excuse.allCases {
            #expect(share(excusedRounds[excuse] ?? 0, rounds) >= 0.05, "excused by \(excuse): \(excusedRounds[excuse] ?? 0)")
        }
    }

    // MARK: the clients' own rules

    static func appcast(_ items: String) -> String {
        """
        <?xml version="1.0" encoding="utf-8"?>
        <rss version="2.0" xmlns:sparkle="\(Appcast.namespace)"><channel><title>T</title>
        \(items)
        </channel></rss>
        """
    }

    /// (c) upgrader reads only the tags form: the bare element makes Sparkle force, never upgrader.
    @Test func theElementFormAloneDoesNotMakeUpgraderForce() {
        let element = Self.appcast("""
            <item><sparkle:version>2.0</sparkle:version><sparkle:criticalUpdate/>
            <enclosure url="https://example.com/2.0.zip" length="0" sparkle:version="2.0" sparkle:os="ios"/></item>
            """)
        #expect(UpgraderClient.appcast(element, platform: "ios", installed: "1.0").outcome == .soft)
        #expect(SparkleClient.outcome(element.replacingOccurrences(of: #" sparkle:os="ios""#, with: ""), host: .init(version: "1.0", os: "14.0")) == .force)
        let tagged = element.replacingOccurrences(
            of: "<sparkle:criticalUpdate/>", with: "<sparkle:tags><sparkle:criticalUpdate/></sparkle:tags>")
        #expect(UpgraderClient.appcast(tagged, platform: "ios", installed: "1.0").outcome == .force)
        // upgrader compares with the tagged item, not the best one: below it only.
        let two = Self.appcast("""
            <item><sparkle:version>3.0</sparkle:version><enclosure url="https://example.com/3" length="0"/></item>
            <item><sparkle:version>2.0</sparkle:version><sparkle:tags><sparkle:criticalUpdate/></sparkle:tags>
            <enclosure url="https://example.com/2" length="0"/></item>
            """)
        #expect(UpgraderClient.appcast(two, platform: "android", installed: "1.9") == .init(outcome: .force, updateURL: "https://example.com/3"))
        #expect(UpgraderClient.appcast(two, platform: "android", installed: "2.0").outcome == .soft)
        // Sparkle reads the best item only: the tag on 2.0 does not count for a host that 3.0 suits.
        #expect(SparkleClient.outcome(two, host: .init(version: "1.9", os: "14.0")) == .soft)
    }

    @Test(arguments: [
        ("1.0", "1.0.0", ComparisonResult.orderedSame), ("1.10", "1.9", .orderedDescending), ("1.0", "1.0.1", .orderedAscending),
        ("2.0-beta.1", "2.0", .orderedSame),  // everything from the first dash is dropped
        ("1.0b1", "1.0", .orderedAscending),  // a string part past the common length is older
        ("199", "200", .orderedAscending), ("10.15", "11.0", .orderedAscending),
    ])
    func sparklesVersionOrderIsItsOwn(_ a: String, _ b: String, expected: ComparisonResult) {
        #expect(SparkleClient.compare(a, b) == expected, "\(a) vs \(b)")
    }

    @Test func upgradersVersionOrderKeepsThreeParts() {
        typealias V = UpgraderClient.DartVersion
        #expect(V("1.2.3.4")! == V("1.2.3")!)  // package:version keeps the first three numbers
        #expect(V("1.2")! == V("1.2.0")!)
        #expect(V("2.0-rc.1")! < V("2.0")! && V("2.0-rc.2")! > V("2.0-rc.1")! && V("2.0-rc.1")! < V("2.0-rc.1.1")!)
        #expect(V("1..2") == nil && V("v1.2") == nil)
        #expect(UpgraderClient.minimumAppVersion("Notes [:mav: 2.1.0] and more")! == V("2.1")!)
        #expect(UpgraderClient.minimumAppVersion("no tag") == nil)
    }

    /// The clients as the models read them: a minimum whose oldest listed release is L forces every host
    /// below L in the appcast (the format names only listed releases) but only below M in the lookup.
    @Test func theAppcastCanNameOnlyAListedReleaseTheLookupAnyVersion() throws {
        let catalog = AppCatalog(
            app: AppInfo(id: "a", name: "A", updateURL: ["ios": "itms-apps://x"], storeId: ["ios": "1"]),
            releases: [
                Release(platform: "ios", version: Version("2.0")!, releasedAt: Self.day(-30)),
                Release(platform: "ios", version: Version("1.0")!, releasedAt: Self.day(-60)),
            ],
            policies: ["ios": Policy(minimumVersion: Version("1.5")!)])
        let feed = UpdateFeedView(catalog, platform: "ios", channel: .live, now: Self.now)
        let appcast = Appcast.render(feed, locale: nil)
        let lookup = try JSONEncoder().encode(AppStoreLookup.answer(feed, locale: nil))
        #expect(UpgraderClient.appcast(appcast, platform: "ios", installed: "1.6").outcome == .force)  // [M, L)
        #expect(UpgraderClient.lookup(lookup, installed: "1.6").outcome == .soft)
        #expect(UpgraderClient.lookup(lookup, installed: "1.4").outcome == .force)
        let check = DecisionEngine.decide(CheckRequest(platform: "ios", version: Version("1.6")!), catalog: catalog, now: Self.now)
        #expect(check.action == .soft)
    }
}
