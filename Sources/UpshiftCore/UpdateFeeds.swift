import Foundation

/// What the feeds for existing client libraries offer (docs/ARCHITECTURE.md, "The update feeds";
/// docs/CLIENTS.md, "What a feed lists"): the releases the check could offer a caller without `install` or
/// `os`, newest first. A feed cannot admit per install, so it lists a release only when every install would
/// be offered it:
///
/// - nothing when the policy is disabled;
/// - live (not withdrawn) releases with `releasedAt ≤ now`, at least `notifyAfterDays` old;
/// - not blocked, not paused, at 100 %;
/// - in the `live` channel only live-channel releases without a pre-release part; `beta` lists both.
public struct UpdateFeedView: Sendable, Equatable {
    public var app: AppInfo
    public var platform: Platform
    public var policy: Policy
    /// Newest first, in version order (docs/ARCHITECTURE.md, "Versions").
    public var releases: [Release]
    /// Listed releases at least `blockAfterDays` old: the check forces them on every install below.
    public var overdue: Set<Version>
    /// Some release of the platform has a `build`: on macOS the appcast then lists only releases with one,
    /// since Sparkle compares `sparkle:version` with the host's build.
    public var hasBuilds: Bool

    public init(_ catalog: AppCatalog, platform: Platform, channel: Channel, now: Date) {
        app = catalog.app
        self.platform = platform
        policy = catalog.policy(for: platform)
        hasBuilds = catalog.releases(for: platform).contains { $0.build != nil }
        guard policy.enabled else {
            releases = []
            overdue = []
            return
        }
        let policy = policy
        let listed = catalog.releases(for: platform).filter { release in
            release.status == .live && release.releasedAt <= now
                && (channel == .beta || (release.channel == .live && release.version.prerelease.isEmpty))
                && !policy.isBlocked(release.version) && !release.rolloutPaused && release.rolloutPercent >= 100
                && policy.notifyAfterDays.map { now.timeIntervalSince(release.releasedAt) >= $0 * 86_400 } ?? true
        }
        releases = listed
        overdue = Set(
            policy.blockAfterDays.map { days in
                listed.filter { now.timeIntervalSince($0.releasedAt) >= days * 86_400 }.map(\.version)
            } ?? [])
    }

    /// The oldest of `items` (newest first) that satisfies the policy's minimum (L): what an install below the
    /// minimum must reach. Nil without a minimum or such a release: a feed never names a minimum no listed
    /// release reaches, since a client told to force with nowhere to go is blocked for good.
    public func minimumTarget(among items: [Release]) -> Release? {
        policy.minimumVersion.flatMap { minimum in items.last { $0.version >= minimum } }
    }

    /// For each of `items` (newest first), the release a client below it must reach for the check to stop
    /// forcing, counting the items at or below it: T = max(L, X), with L the oldest item at or above the
    /// minimum and X the newest overdue item (at least `blockAfterDays` old: the check forces every install
    /// below it). Nil where neither exists. The first is T for the whole feed.
    public func forceTargets(among items: [Release]) -> [Release?] {
        var targets = [Release?](repeating: nil, count: items.count)
        var (l, x): (Release?, Release?) = (nil, nil)
        for index in items.indices.reversed() {  // oldest first
            let item = items[index]
            if l == nil, let minimum = policy.minimumVersion, item.version >= minimum { l = item }
            if overdue.contains(item.version) { x = item }
            targets[index] = [l, x].compactMap { $0 }.max { $0.version < $1.version }
        }
        return targets
    }

    /// The notes of a release in `locale`, as the check chooses them (the tag, its language, the app's
    /// default locale).
    public func notes(_ release: Release, locale: String?) -> [String] {
        LocaleTag.notes(release.notes, locale: locale, defaultLocale: app.defaultLocale)
    }

    /// Where a release is downloaded or described: its own URL, else the app's for the platform.
    public func pageURL(_ release: Release) -> String? {
        release.updateURL ?? app.updateURL[platform]
    }
}

extension Release {
    /// What an operator must hear about this macOS release among the platform's `releases` (this one
    /// included or not), for the appcast Sparkle reads (``Appcast/items(_:)``); `appPageURL` is the app's
    /// `updateURL` for the platform. At most five of each kind, by version.
    /// - Sparkle compares `sparkle:version`, the build (CFBundleVersion), not the version, so a build that
    ///   does not increase with versions makes it offer the wrong update, or none.
    /// - When the platform has builds, a release without one is left out of the appcast.
    /// - A release whose only URL is not http(s) (an `itms-apps:` store page) is left out: one such item
    ///   makes Sparkle refuse the whole appcast.
    public func appcastWarnings(among releases: [Release], appPageURL: String?) -> [String] {
        guard platform == "macos" else { return [] }
        let others = releases.filter { $0.platform == platform && $0.version != version }
        var warnings: [String] = []
        if let build {
            let crossed = others.filter { other in
                guard let otherBuild = other.build else { return false }
                return (version > other.version && build <= otherBuild) || (version < other.version && build >= otherBuild)
            }
            warnings += crossed.sorted { $0.version < $1.version }.prefix(5).map { other in
                "build \(build) of macos \(version.text) does not increase with versions: \(other.version.text) has build "
                    + "\(other.build!); Sparkle compares builds, so the appcast offers the wrong update"
            }
            let unbuilt = others.filter { $0.build == nil && $0.status == .live }.sorted { $0.version < $1.version }
            if !unbuilt.isEmpty {
                warnings.append(
                    "macos " + unbuilt.prefix(5).map(\.version.text).joined(separator: ", ")
                        + (unbuilt.count > 5 ? " and \(unbuilt.count - 5) more" : "")
                        + " have no build: the appcast leaves them out, since Sparkle compares builds")
            }
        } else if others.contains(where: { $0.build != nil }) {
            warnings.append(
                "macos \(version.text) has no build: the appcast leaves it out, since the platform's other releases "
                    + "have builds and Sparkle compares builds")
        }
        if downloadURL == nil, (updateURL ?? appPageURL).map(CatalogInput.isDownloadURL) != true {
            warnings.append(
                "macos \(version.text) has no downloadURL and no http(s) page (its updateURL or the app's): the appcast "
                    + "leaves it out, since Sparkle refuses a whole appcast with such an item")
        }
        return warnings
    }
}

/// Text for XML 1.0 documents: escaped, and without the characters XML 1.0 cannot carry (C0 controls
/// other than tab, line feed and carriage return; U+FFFE, U+FFFF). Catalog writes refuse those, but a
/// catalog written before may hold them, and one invalid character makes a client reject the whole feed.
public enum XMLText {
    public static func escaped(_ text: String) -> String {
        var out = ""
        out.unicodeScalars.reserveCapacity(text.unicodeScalars.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            case "\r": out += "&#13;"  // a literal CR would be read back as a line feed
            default:
                if isAllowed(scalar) { out.unicodeScalars.append(scalar) }
            }
        }
        return out
    }

    /// XML 1.0's `Char` production (Swift strings hold no surrogates).
    public static func isAllowed(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x09, 0x0A, 0x0D: true
        case 0x00..<0x20, 0xFFFE, 0xFFFF: false
        default: true
        }
    }
}

/// The Sparkle appcast (`/v1/apps/{app}/appcast.xml`): RSS 2.0 with Sparkle's namespace, read by Sparkle
/// on macOS and by upgrader (Flutter), which matches the literal `sparkle:` prefix. Which releases become
/// items is ``items(_:)``; docs/CLIENTS.md says what each client decides from them.
public enum Appcast {
    public static let namespace = "http://www.andymatuschak.org/xml-namespaces/sparkle"

    public static func render(_ feed: UpdateFeedView, locale: String?) -> String {
        let macOS = feed.platform == "macos"
        var xml = """
            <?xml version="1.0" encoding="utf-8"?>
            <rss version="2.0" xmlns:sparkle="\(namespace)">
            <channel>
            <title>\(XMLText.escaped(feed.app.name))</title>

            """
        if let link = feed.app.updateURL[feed.platform] { xml += "<link>\(XMLText.escaped(link))</link>\n" }
        xml += "<description>\(XMLText.escaped("Updates of \(feed.app.name) (\(feed.platform))"))</description>\n"
        let items = items(feed)
        // T = max(L, X) (``UpdateFeedView/forceTargets(among:)``): upgrader forces below the one item tagged
        // critical, so T carries the tag. Sparkle reads the critical mark of the best item its host can run
        // only, so every item names the version below which it is critical, counting the items at or
        // below it: on the newest that is T, on an older one (the best for a host the newer ones exclude
        // by OS) what the check forces on such a host.
        let targets = feed.forceTargets(among: items)
        let tagged = targets.first ?? nil
        for (index, release) in items.enumerated() {
            let version = XMLText.escaped(sparkleVersion(release, macOS: macOS))
            xml += "<item>\n"
            xml += "<title>\(XMLText.escaped("\(feed.app.name) \(release.version.text)"))</title>\n"
            xml += "<pubDate>\(rfc822(release.releasedAt))</pubDate>\n"
            xml += "<sparkle:version>\(version)</sparkle:version>\n"
            xml += "<sparkle:shortVersionString>\(XMLText.escaped(release.version.text))</sparkle:shortVersionString>\n"
            if macOS, let minimum = release.minimumOSVersion {
                xml += "<sparkle:minimumSystemVersion>\(XMLText.escaped(minimum.text))</sparkle:minimumSystemVersion>\n"
            }
            if macOS, let maximum = release.maximumOSVersion {
                xml += "<sparkle:maximumSystemVersion>\(XMLText.escaped(maximum.text))</sparkle:maximumSystemVersion>\n"
            }
            if release.channel == .beta || !release.version.prerelease.isEmpty {
                xml += "<sparkle:channel>beta</sparkle:channel>\n"
            }
            if let critical = targets[index] {
                let below = XMLText.escaped(sparkleVersion(critical, macOS: macOS))
                xml += "<sparkle:criticalUpdate sparkle:version=\"\(below)\"/>\n"
            }
            if release.version == tagged?.version {
                xml += "<sparkle:tags><sparkle:criticalUpdate/></sparkle:tags>\n"
            }
            let notes = feed.notes(release, locale: locale).joined(separator: "\n")
            xml += "<description sparkle:format=\"plain-text\">\(XMLText.escaped(notes))</description>\n"
            if let download = release.downloadURL {
                xml += "<enclosure url=\"\(XMLText.escaped(download))\" length=\"\(release.downloadLength ?? 0)\""
                xml += " type=\"application/octet-stream\" sparkle:version=\"\(version)\""
                if !macOS { xml += " sparkle:os=\"\(XMLText.escaped(feed.platform.rawValue))\"" }
                if let signature = release.edSignature { xml += " sparkle:edSignature=\"\(XMLText.escaped(signature))\"" }
                xml += "/>\n"
            } else if let page = feed.pageURL(release) {
                if macOS {
                    // Sparkle would download an enclosure as the update: a page is an informational link.
                    xml += "<link>\(XMLText.escaped(page))</link>\n"
                } else {
                    // upgrader's Update opens the enclosure's URL and ignores <link>.
                    xml += "<enclosure url=\"\(XMLText.escaped(page))\" length=\"0\" type=\"text/html\""
                    xml += " sparkle:version=\"\(version)\" sparkle:os=\"\(XMLText.escaped(feed.platform.rawValue))\"/>\n"
                }
            }
            xml += "</item>\n"
        }
        xml += "</channel>\n</rss>\n"
        return xml
    }

    /// The listed releases the appcast has an item for, newest first. Sparkle refuses the whole appcast for
    /// one item without an enclosure or an http(s) `<link>`, so on macOS a release needs a `downloadURL` or
    /// an http(s) page (its own or the app's), and, when the platform has builds, a `build` of its own.
    /// Elsewhere every release with a download or a page is listed (the page becomes the enclosure).
    public static func items(_ feed: UpdateFeedView) -> [Release] {
        guard feed.platform == "macos" else {
            return feed.releases.filter { $0.downloadURL != nil || feed.pageURL($0) != nil }
        }
        return feed.releases.filter { release in
            (!feed.hasBuilds || release.build != nil)
                && (release.downloadURL != nil || feed.pageURL(release).map(CatalogInput.isDownloadURL) == true)
        }
    }

    /// What `sparkle:version` carries: on macOS the build (Sparkle compares it with CFBundleVersion), else
    /// the version as written (upgrader compares it with the marketing version).
    public static func sparkleVersion(_ release: Release, macOS: Bool) -> String {
        if macOS, let build = release.build { return String(build) }
        return release.version.text
    }

    /// `E, dd MMM yyyy HH:mm:ss +0000`, in English whatever the server's locale.
    public static func rfc822(_ date: Date) -> String {
        let stamp = Timestamp.formatSeconds(date)  // yyyy-MM-ddTHH:mm:ssZ
        // The day as `formatSeconds` counts it: milliseconds rounded, then whole days toward the past.
        let millis = Int((date.timeIntervalSince1970 * 1000).rounded())
        let days = (millis - ((millis % 86_400_000) + 86_400_000) % 86_400_000) / 86_400_000
        let weekdays = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"]  // 1970-01-01 was a Thursday
        let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
        let (year, month, day) = Timestamp.civilFromDays(days)
        return "\(weekdays[((days % 7) + 7) % 7]), \(two(day)) \(months[month - 1]) \(year) \(stamp.dropFirst(11).prefix(8)) +0000"
    }

    static func two(_ value: Int) -> String { value < 10 ? "0\(value)" : "\(value)" }
}

/// The iTunes lookup answer (`/v1/apps/{app}/lookup`) as Siren and upgrader read Apple's: always one
/// result or none.
public enum AppStoreLookup {
    /// The one result, keys as Apple spells them.
    public struct Result: Sendable, Equatable, Encodable {
        public var trackId: Int64
        public var trackName: String
        public var bundleId: String?
        public var version: String
        /// `yyyy-MM-dd'T'HH:mm:ss'Z'`: Siren's parser fails on fractions.
        public var currentVersionReleaseDate: String
        public var minimumOsVersion: String
        public var releaseNotes: String
        public var trackViewUrl: String?
        /// `[:mav: M]` when the policy has a minimum: upgrader's minimum-version tag.
        public var description: String
        public var kind = "software"
    }

    public struct Answer: Sendable, Equatable, Encodable {
        public var resultCount: Int
        public var results: [Result]

        public static let empty = Answer(resultCount: 0, results: [])
    }

    /// The platforms Apple's lookup answers, each with the `entity` that asks for it (nil: the default,
    /// iOS software).
    public static let entities: [Platform: String?] = ["ios": nil, "tvos": "tvSoftware", "macos": "macSoftware"]

    /// The platform a lookup's `entity` asks for: iOS unless it names tvOS or macOS software.
    public static func platform(entity: String?) -> Platform {
        entities.first { $0.value != nil && $0.value == entity }?.key ?? "ios"
    }

    /// What Siren shows when a release sets no minimum OS: it requires the field.
    public static let noMinimumOS = "1.0"

    /// Whether a lookup's `bundleId` and `id` (as the request gave them) name this app on `platform`:
    /// one that differs from the app's finds no result, as on Apple's. An app without a bundle id for the
    /// platform takes any `bundleId` (Siren and upgrader always send one).
    public static func matches(_ app: AppInfo, platform: Platform, bundleId: String?, id: String?) -> Bool {
        if let bundleId, let own = app.bundleId[platform], bundleId != own { return false }
        if let id, numericId(id) == nil || numericId(id) != app.storeId[platform].flatMap(numericId) { return false }
        return true
    }

    /// The answer for `feed` (built for the `live` channel, so without pre-releases): its newest release,
    /// or no result when there is none or the app's store id for the platform is not numeric (Siren cannot
    /// use a result without a real id). `bundleId` is echoed when the app has none for the platform (the
    /// lookup was asked for it), as Apple's answer always names one.
    public static func answer(_ feed: UpdateFeedView, locale: String?, bundleId asked: String? = nil) -> Answer {
        guard let store = feed.app.storeId[feed.platform], let trackId = numericId(store),
            let latest = feed.releases.first
        else { return .empty }
        let result = Result(
            trackId: trackId, trackName: feed.app.name, bundleId: feed.app.bundleId[feed.platform] ?? asked,
            version: latest.version.text, currentVersionReleaseDate: Timestamp.formatSeconds(latest.releasedAt),
            minimumOsVersion: latest.minimumOSVersion?.text ?? noMinimumOS,
            releaseNotes: feed.notes(latest, locale: locale).joined(separator: "\n"),
            trackViewUrl: feed.pageURL(latest),
            description: minimumAppVersion(feed).map { "[:mav: \($0.text)]" } ?? "")
        return Answer(resultCount: 1, results: [result])
    }

    /// upgrader's `[:mav: V]`: every install below V must update. The lookup can name any version, so V is
    /// the larger of the minimum (only when a listed release reaches it: upgrader would otherwise block
    /// with nowhere to go) and the newest overdue release X (the check forces every install below it).
    public static func minimumAppVersion(_ feed: UpdateFeedView) -> Version? {
        let minimum = feed.minimumTarget(among: feed.releases).flatMap { _ in feed.policy.minimumVersion }
        let overdue = feed.releases.first { feed.overdue.contains($0.version) }?.version
        switch (minimum, overdue) {
        case let (m?, x?): return max(m, x)
        case let (m, x): return m ?? x
        }
    }

    /// A store id that is all ASCII digits and fits a JSON integer that every client reads exactly.
    static func numericId(_ text: String) -> Int64? {
        guard !text.isEmpty, text.utf8.count <= 15, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
            return nil
        }
        return Int64(text)
    }
}

/// iVersion's versions plist (`/v1/apps/{app}/versions.plist`): a dictionary of version (as written) →
/// array of note lines, newest first.
public enum VersionsPlist {
    public static func render(_ feed: UpdateFeedView, locale: String?) -> String {
        var xml = """
            <?xml version="1.0" encoding="UTF-8"?>
            <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
            <plist version="1.0">
            <dict>

            """
        for release in feed.releases {
            xml += "<key>\(XMLText.escaped(release.version.text))</key>\n<array>\n"
            for line in feed.notes(release, locale: locale) { xml += "<string>\(XMLText.escaped(line))</string>\n" }
            xml += "</array>\n"
        }
        xml += "</dict>\n</plist>\n"
        return xml
    }
}
