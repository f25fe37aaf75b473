import Foundation
import Testing
import UpshiftCore
import UpshiftTestData

/// The feeds for existing client libraries (docs/CLIENTS.md), parsed back with a strict XML parser, a
/// property-list parser and a JSON parser, and read by the rules each client applies.
@Suite struct UpdateFeedsTests {
    static let now = Timestamp.parse("2026-06-01T12:00:00Z")!

    static func day(_ offset: Double) -> Date { now.addingTimeInterval(offset * 86_400) }

    static func catalog(policy: Policy = Policy(), platform: Platform = "ios", _ releases: [Release]) -> AppCatalog {
        AppCatalog(
            app: AppInfo(
                id: "notes", name: "Notes & Co", defaultLocale: "en",
                updateURL: ["ios": "https://apps.apple.com/app/id123", "macos": "https://example.com/notes"],
                storeId: ["ios": "123456789", "macos": "mac-1"], bundleId: ["ios": "com.example.notes"]),
            releases: releases, policies: [platform: policy])
    }

    static func release(
        _ version: String, _ ageDays: Double, platform: Platform = "ios", build: Int? = nil, channel: Channel = .live,
        notes: [String: [String]] = [:], status: ReleaseStatus = .live, rollout: Double = 100, paused: Bool = false
    ) -> Release {
        Release(
            platform: platform, version: Version(version)!, build: build, releasedAt: day(-ageDays), channel: channel,
            notes: notes, status: status, rolloutPercent: rollout, rolloutPaused: paused)
    }

    // MARK: what a feed offers

    @Test func aFeedListsOnlyWhatEveryInstallWouldBeOffered() {
        let catalog = Self.catalog(
            policy: Policy(blockedVersions: [Version("1.6")!], notifyAfterDays: 2),
            [
                Self.release("2.0", -1),  // in the future
                Self.release("1.9", 1),  // younger than notifyAfterDays
                Self.release("1.8", 5, rollout: 50),  // not every install
                Self.release("1.7.1", 5, paused: true),
                Self.release("1.7", 6, status: .withdrawn),
                Self.release("1.6", 7),  // blocked
                Self.release("1.5.0-beta.1", 8),  // a pre-release
                Self.release("1.4.2", 8, channel: .beta),
                Self.release("1.4", 9),
                Self.release("1.3", 10),
            ])
        let live = UpdateFeedView(catalog, platform: "ios", channel: .live, now: Self.now)
        #expect(live.releases.map(\.version.text) == ["1.4", "1.3"])
        let beta = UpdateFeedView(catalog, platform: "ios", channel: .beta, now: Self.now)
        #expect(beta.releases.map(\.version.text) == ["1.5.0-beta.1", "1.4.2", "1.4", "1.3"])
        var disabled = catalog
        disabled.policies["ios"]?.enabled = false
        #expect(UpdateFeedView(disabled, platform: "ios", channel: .beta, now: Self.now).releases.isEmpty)
        #expect(UpdateFeedView(catalog, platform: "android", channel: .live, now: Self.now).releases.isEmpty)
    }

    @Test func theMinimumsTargetIsTheOldestListedReleaseThatSatisfiesIt() {
        let releases = [Self.release("3.0", 1), Self.release("2.1", 2), Self.release("2.0", 3), Self.release("1.0", 4)]
        let feed = UpdateFeedView(Self.catalog(policy: Policy(minimumVersion: Version("2.0.5")!), releases), platform: "ios", channel: .live, now: Self.now)
        #expect(feed.minimumTarget(among: feed.releases)?.version.text == "2.1")
        let none = UpdateFeedView(Self.catalog(policy: Policy(minimumVersion: Version("4")!), releases), platform: "ios", channel: .live, now: Self.now)
        #expect(none.minimumTarget(among: none.releases) == nil)
        let overdue = UpdateFeedView(Self.catalog(policy: Policy(blockAfterDays: 2.5), releases), platform: "ios", channel: .live, now: Self.now)
        #expect(overdue.overdue == [Version("2.0")!, Version("1.0")!])
    }

    // MARK: Sparkle appcast

    @Test func theAppcastIsWhatSparkleAndUpgraderRead() throws {
        let catalog = Self.catalog(
            policy: Policy(minimumVersion: Version("1.5")!, blockAfterDays: 30), platform: "macos",
            [
                Release(
                    platform: "macos", version: Version("2.0")!, build: 200, releasedAt: Self.day(-3),
                    minimumOSVersion: Version("13.0"), notes: ["en": ["Faster", "Safer <3"], "de": ["Schneller"]],
                    downloadURL: "https://example.com/Notes-2.0.zip", downloadLength: 12_345,
                    edSignature: Data(repeating: 7, count: 64).base64EncodedString()),
                Release(platform: "macos", version: Version("1.6")!, build: 160, releasedAt: Self.day(-10), notes: ["en": ["Fixes"]]),
                // No build while the others have one: Sparkle could not compare it, so it is left out.
                Release(platform: "macos", version: Version("1.7")!, releasedAt: Self.day(-8), downloadURL: "https://example.com/1.7.zip"),
                Release(platform: "macos", version: Version("1.5")!, build: 150, releasedAt: Self.day(-40)),
                Release(platform: "macos", version: Version("2.1-beta.1")!, build: 210, releasedAt: Self.day(-1), channel: .beta),
            ])
        let xml = Appcast.render(UpdateFeedView(catalog, platform: "macos", channel: .beta, now: Self.now), locale: "de-AT")
        #expect(xml.contains(#"<rss version="2.0" xmlns:sparkle="http://www.andymatuschak.org/xml-namespaces/sparkle">"#))
        let root = try XMLTree.parse(xml)
        #expect(root.name == "rss" && root.namespace == nil)
        let items = root.child("channel")?.children("item") ?? []
        #expect(items.map { $0.child("sparkle:shortVersionString")?.text } == ["2.1-beta.1", "2.0", "1.6", "1.5"])
        // macOS: sparkle:version is the build, element and enclosure alike.
        #expect(items.map { $0.child("sparkle:version")?.text } == ["210", "200", "160", "150"])
        #expect(items.allSatisfy { $0.child("sparkle:version")?.namespace == Appcast.namespace })
        let enclosure = try #require(items[1].child("enclosure"))
        #expect(enclosure.attributes["sparkle:version"] == "200")
        #expect(enclosure.attributes["url"] == "https://example.com/Notes-2.0.zip")
        #expect(enclosure.attributes["length"] == "12345")
        #expect(enclosure.attributes["sparkle:os"] == nil)
        #expect(enclosure.attributes["sparkle:edSignature"]?.count == 88)
        #expect(items[2].child("enclosure") == nil && items[2].child("link")?.text == "https://example.com/notes")
        #expect(items[1].child("sparkle:minimumSystemVersion")?.text == "13.0")
        #expect(items[0].child("sparkle:channel")?.text == "beta" && items[1].child("sparkle:channel") == nil)
        // The minimum 1.5 (L), also 40 days old with blockAfterDays 30 (X): every item names build 150 as the
        // one below which it is critical (T = max(L, X)); 1.5 alone carries upgrader's tag; no bare mark.
        #expect(items.map { $0.child("sparkle:criticalUpdate")?.attributes } == Array(repeating: ["sparkle:version": "150"], count: 4))
        #expect(items[3].child("sparkle:tags")?.child("sparkle:criticalUpdate") != nil)
        #expect(items.dropLast().allSatisfy { $0.child("sparkle:tags") == nil })
        // Notes in the locale asked for (de-AT → de), lines joined by line feeds, plain text.
        #expect(items[1].child("description")?.text == "Schneller")
        #expect(items[1].child("description")?.attributes["sparkle:format"] == "plain-text")
        #expect(items[1].child("pubDate")?.text == "Fri, 29 May 2026 12:00:00 +0000")
        let english = try XMLTree.parse(Appcast.render(UpdateFeedView(catalog, platform: "macos", channel: .live, now: Self.now), locale: nil))
        #expect(english.child("channel")?.children("item").first?.child("description")?.text == "Faster\nSafer <3")
    }

    @Test func everyItemHasAnEnclosureOrALinkAndPreReleasesAreBeta() throws {
        var catalog = Self.catalog(
            policy: Policy(minimumVersion: Version("1.0")!, blockAfterDays: 4), platform: "android",
            [Self.release("3.0-rc.1", 1, platform: "android"), Self.release("2.0", 5, platform: "android"),
             Self.release("1.0", 6, platform: "android")])
        // Android: no updateURL for the platform; only 2.0 has a download.
        catalog.upsert(Release(platform: "android", version: Version("2.0")!, releasedAt: Self.day(-5), downloadURL: "https://example.com/a.apk"))
        var xml = Appcast.render(UpdateFeedView(catalog, platform: "android", channel: .beta, now: Self.now), locale: nil)
        var items = try #require(try XMLTree.parse(xml).child("channel")).children("item")
        // 3.0-rc.1 and 1.0 have neither a download nor a page: Sparkle would refuse the whole appcast.
        #expect(items.map { $0.child("sparkle:shortVersionString")?.text } == ["2.0"])
        // The minimum's target is the oldest item listed: 2.0, which is also overdue: one versioned mark.
        #expect(items[0].child("sparkle:criticalUpdate")?.attributes == ["sparkle:version": "2.0"])
        #expect(items[0].children("sparkle:criticalUpdate").count == 1)
        #expect(items[0].child("sparkle:tags")?.child("sparkle:criticalUpdate") != nil)

        catalog.app.updateURL["android"] = "https://play.google.com/store/apps/details?id=x"
        xml = Appcast.render(UpdateFeedView(catalog, platform: "android", channel: .beta, now: Self.now), locale: nil)
        items = try #require(try XMLTree.parse(xml).child("channel")).children("item")
        // Every item leads somewhere upgrader's Update can open: the download, else the page as the enclosure.
        #expect(items.count == 3 && items.allSatisfy { $0.child("link") == nil })
        #expect(items.map { $0.child("enclosure")?.attributes["url"] }
            == ["https://play.google.com/store/apps/details?id=x", "https://example.com/a.apk", "https://play.google.com/store/apps/details?id=x"])
        #expect(items[0].child("enclosure")?.attributes["sparkle:os"] == "android" && items[0].child("enclosure")?.attributes["length"] == "0")
        // A pre-release of the live channel is still beta to Sparkle's allowedChannels.
        #expect(items[0].child("sparkle:channel")?.text == "beta" && items[1].child("sparkle:channel") == nil)
        // With a minimum above every listed release, neither critical form.
        catalog.policies["android"]?.minimumVersion = Version("9")
        catalog.policies["android"]?.blockAfterDays = nil
        xml = Appcast.render(UpdateFeedView(catalog, platform: "android", channel: .live, now: Self.now), locale: nil)
        #expect(!xml.contains("criticalUpdate"))
    }

    @Test func onOtherPlatformsSparkleVersionIsTheVersionAndTheEnclosureNamesTheOS() throws {
        var release = Self.release("4.2.0", 3, build: 99)
        release.downloadURL = "https://example.com/app.apk"
        let xml = Appcast.render(UpdateFeedView(Self.catalog([release]), platform: "ios", channel: .live, now: Self.now), locale: nil)
        let item = try #require(try XMLTree.parse(xml).child("channel")?.child("item"))
        #expect(item.child("sparkle:version")?.text == "4.2.0")
        #expect(item.child("enclosure")?.attributes["sparkle:version"] == "4.2.0")
        #expect(item.child("enclosure")?.attributes["sparkle:os"] == "ios")
        #expect(item.child("enclosure")?.attributes["length"] == "0")
    }

    @Test func pubDatesAreRFC822InEnglish() {
        #expect(Appcast.rfc822(Timestamp.parse("2026-03-01T00:00:00Z")!) == "Sun, 01 Mar 2026 00:00:00 +0000")
        #expect(Appcast.rfc822(Timestamp.parse("1969-12-31T23:59:59.400Z")!) == "Wed, 31 Dec 1969 23:59:59 +0000")
        #expect(Appcast.rfc822(Timestamp.parse("2024-02-29T13:05:09.999Z")!) == "Thu, 29 Feb 2024 13:05:09 +0000")
    }

    /// Random catalogs, every text field drawn from every Unicode class (including what XML cannot carry,
    /// as a catalog written before the rule may hold), at the limits (versions of six nine-digit parts or
    /// with a pre-release, 50 note lines of 1,000 characters in three locales, OS bounds, signatures,
    /// download lengths, store ids numeric or not): the appcast and the plist parse strictly, the lookup
    /// is JSON with one result or none and an integer `trackId`.
    @Test func everyFeedOfRandomCatalogsParsesStrictly() throws {
        var generator = SplitMix64(seed: 19)
        let pools: [ClosedRange<UInt32>] = [
            0x00...0x1F, 0x20...0x7E, 0x7F...0x9F, 0xA0...0x2FF, 0x300...0x36F, 0x590...0x6FF, 0x2000...0x206F,
            0xD7F0...0xD7FF, 0xE000...0xF8FF, 0xFDD0...0xFDEF, 0xFFF0...0xFFFF, 0x1F300...0x1F6FF, 0x10FFF0...0x10FFFF,
        ]
        func text(_ length: Int) -> String {
            var out = String.UnicodeScalarView()
            for _ in 0..<length {
                let pool = pools[generator.int(0...(pools.count - 1))]
                if let scalar = Unicode.Scalar(UInt32(generator.int(Int(pool.lowerBound)...Int(pool.upperBound)))) {
                    out.append(scalar)
                }
            }
            return String(out)
        }
        /// A version unique by its first part: up to six parts, some at the largest value, some with a
        /// pre-release, never longer than a version may be.
        func version(_ index: Int) -> Version {
            var parts = [String(index + 1)]
            for _ in 0..<generator.int(0...(Version.maximumComponentCount - 1)) {
                parts.append(String(generator.unit() < 0.3 ? Version.maximumComponent : generator.int(0...99)))
            }
            var text = parts.joined(separator: ".")
            if generator.unit() < 0.3 { text += "-beta.\(generator.int(1...9))" }
            return Version(text) ?? Version(parts.joined(separator: "."))!
        }
        let locales = ["en", "de", "pt-BR"]
        // What the rounds covered, so that the test cannot pass on empty feeds.
        var (itemsSeen, longNotesSeen, resultsSeen, largestVersions) = (0, 0, 0, 0)
        for round in 0..<150 {
            let platform: Platform = ["ios", "macos", "android"][round % 3]
            let atLimit = round % 25 == 0
            var releases: [Release] = []
            for index in 0..<generator.int(0...6) {
                var notes: [String: [String]] = [:]
                for locale in locales where locale == "en" || generator.unit() < 0.5 {
                    let lines = atLimit ? CatalogInput.maximumNoteLines : generator.int(0...5)
                    notes[locale] = (0..<lines).map { _ in text(atLimit ? CatalogInput.maximumNoteLength : generator.int(0...40)) }
                }
                let written = version(index)
                var release = Release(
                    platform: platform, version: written,
                    build: generator.unit() < 0.5 ? generator.int(0...999_999) : nil,
                    releasedAt: Self.day(-Double(generator.int(0...400))),
                    channel: !written.prerelease.isEmpty || generator.unit() < 0.2 ? .beta : .live,
                    notes: notes,
                    updateURL: generator.unit() < 0.5 ? "https://example.com/\(index)?a=1&b=<2>" : nil)
                if generator.unit() < 0.5 {
                    release.minimumOSVersion = Version("\(generator.int(10...14)).\(generator.int(0...9))")
                    if generator.unit() < 0.5 { release.maximumOSVersion = Version("\(generator.int(15...99)).\(Version.maximumComponent)") }
                }
                if generator.unit() < 0.5 {
                    release.downloadURL = "https://example.com/d?x=\"&y='"
                    release.downloadLength = generator.int(0...CatalogInput.maximumDownloadLength)
                    if generator.unit() < 0.5 {
                        release.edSignature = Data((0..<64).map { _ in UInt8(generator.int(0...255)) }).base64EncodedString()
                    }
                }
                releases.append(release)
            }
            var catalog = Self.catalog(
                policy: Policy(minimumVersion: Version("\(generator.int(1...5))"), blockAfterDays: 100), platform: platform,
                releases)
            catalog.app.name = text(generator.int(1...CatalogInput.maximumNameLength))
            let numericStore = generator.unit() < 0.7
            catalog.app.storeId[platform] = numericStore ? String(generator.int(1...999_999_999_999_999)) : text(generator.int(1...20))
            let locale = [nil, "de", "pt-BR", "fr"][generator.int(0...3)]
            for channel in Channel.allCases {
                let feed = UpdateFeedView(catalog, platform: platform, channel: channel, now: Self.now)
                let appcast = Appcast.render(feed, locale: locale)
                let tree = try XMLTree.parse(appcast)
                let items = tree.child("channel")?.children("item") ?? []
                #expect(items.count == Appcast.items(feed).count)
                #expect(items.allSatisfy { $0.child("enclosure") != nil || $0.child("link") != nil })
                // Sparkle takes the whole appcast: every item has a version and an enclosure or an http(s) link.
                #expect(SparkleClient.items(appcast) != nil, "round \(round): Sparkle refuses the appcast")
                itemsSeen += items.count
                largestVersions += feed.releases.count { $0.version.text.contains(String(Version.maximumComponent)) }
                longNotesSeen += feed.releases.count { feed.notes($0, locale: locale).count == CatalogInput.maximumNoteLines }
                let plist = VersionsPlist.render(feed, locale: locale)
                let parsed = try PropertyListSerialization.propertyList(from: Data(plist.utf8), format: nil)
                let dictionary = try #require(parsed as? [String: [String]])
                #expect(dictionary.count == feed.releases.count)
                for release in feed.releases {
                    let expected = feed.notes(release, locale: locale)
                        .map { String(String.UnicodeScalarView($0.unicodeScalars.filter(XMLText.isAllowed))) }
                    #expect(dictionary[release.version.text] == expected)
                }
                guard channel == .live else { continue }
                let json = try JSONEncoder().encode(AppStoreLookup.answer(feed, locale: locale))
                let lookup = try JSONSerialization.jsonObject(with: json) as? [String: Any]
                let results = try #require(lookup?["results"] as? [[String: Any]])
                #expect(lookup?["resultCount"] as? Int == results.count && results.count <= 1)
                let expectsResult = !feed.releases.isEmpty && numericStore
                #expect(results.count == (expectsResult ? 1 : 0), "round \(round): \(feed.releases.count) releases")
                resultsSeen += results.count
                if let result = results.first {
                    // An integer in the JSON itself, as Siren reads it: digits, no quotes, no fraction.
                    let store = try #require(catalog.app.storeId[platform])
                    let encoded = String(decoding: json, as: UTF8.self)
                    #expect(encoded.contains("\"trackId\":\(store),") || encoded.contains("\"trackId\":\(store)}"), "\(store)")
                    #expect(result["version"] as? String == feed.releases.first?.version.text)
                }
            }
        }
        #expect(itemsSeen > 100 && resultsSeen > 20 && longNotesSeen > 3 && largestVersions > 10,
            "items \(itemsSeen), lookup results \(resultsSeen), 50-line notes \(longNotesSeen), nine-digit parts \(largestVersions)")
    }

    // MARK: iVersion plist

    @Test func theVersionsPlistMapsEachVersionAsWrittenToItsNotes() throws {
        let catalog = Self.catalog([
            Self.release("1.10", 1, notes: ["en": ["Ten"], "fr": ["Dix"]]), Self.release("1.9.0", 2, notes: ["en": ["Nine"]]),
            Self.release("1.8", 3),
        ])
        let plist = VersionsPlist.render(UpdateFeedView(catalog, platform: "ios", channel: .live, now: Self.now), locale: "fr-CA")
        let parsed = try PropertyListSerialization.propertyList(from: Data(plist.utf8), format: nil) as? [String: [String]]
        #expect(parsed == ["1.10": ["Dix"], "1.9.0": ["Nine"], "1.8": []])
        var disabled = catalog
        disabled.policies["ios"] = Policy(enabled: false)
        let empty = VersionsPlist.render(UpdateFeedView(disabled, platform: "ios", channel: .live, now: Self.now), locale: nil)
        #expect(try PropertyListSerialization.propertyList(from: Data(empty.utf8), format: nil) as? [String: [String]] == [:])
    }

    // MARK: iTunes lookup

    @Test func theLookupIsOneResultAsSirenAndUpgraderReadIt() throws {
        var newest = Self.release("2.4.1", 2, notes: ["en": ["One", "Two"]])
        newest.releasedAt = Timestamp.parse("2026-05-30T08:15:30.250Z")!
        newest.minimumOSVersion = Version("16.4")
        let catalog = Self.catalog(policy: Policy(minimumVersion: Version("2.0")!), [newest, Self.release("2.3", 5)])
        let feed = UpdateFeedView(catalog, platform: "ios", channel: .live, now: Self.now)
        let json = try JSONSerialization.jsonObject(with: JSONEncoder().encode(AppStoreLookup.answer(feed, locale: nil))) as? [String: Any]
        #expect(json?["resultCount"] as? Int == 1)
        let result = try #require((json?["results"] as? [[String: Any]])?.first)
        #expect(result["trackId"] as? Int == 123_456_789)
        #expect(result["bundleId"] as? String == "com.example.notes")
        #expect(result["version"] as? String == "2.4.1")
        #expect(result["currentVersionReleaseDate"] as? String == "2026-05-30T08:15:30Z")
        #expect(result["minimumOsVersion"] as? String == "16.4")
        #expect(result["releaseNotes"] as? String == "One\nTwo")
        #expect(result["description"] as? String == "[:mav: 2.0]")
        #expect(result["trackViewUrl"] as? String == "https://apps.apple.com/app/id123")
        let text = String(decoding: try JSONEncoder().encode(AppStoreLookup.answer(feed, locale: nil)), as: UTF8.self)
        #expect(text.contains(#/"trackId":123456789[,}]/#))  // a JSON integer, whatever the key order
        // Without a minimum OS or a minimum version: Siren's required field, and no tag.
        let plain = UpdateFeedView(Self.catalog([Self.release("2.3", 5)]), platform: "ios", channel: .live, now: Self.now)
        let bare = try #require(AppStoreLookup.answer(plain, locale: nil).results.first)
        #expect(bare.minimumOsVersion == "1.0" && bare.description.isEmpty)
        // A store id that is not all digits cannot be a trackId: no result.
        #expect(AppStoreLookup.answer(UpdateFeedView(catalog, platform: "macos", channel: .live, now: Self.now), locale: nil) == .empty)
        #expect(AppStoreLookup.matches(catalog.app, platform: "ios", bundleId: "com.example.notes", id: "123456789"))
        #expect(!AppStoreLookup.matches(catalog.app, platform: "ios", bundleId: "com.example.other", id: nil))
        #expect(!AppStoreLookup.matches(catalog.app, platform: "ios", bundleId: nil, id: "987"))
        #expect(AppStoreLookup.matches(catalog.app, platform: "ios", bundleId: nil, id: nil))
        // An app without a bundle id on the platform takes any (Siren and upgrader always send one).
        #expect(AppStoreLookup.matches(catalog.app, platform: "tvos", bundleId: "com.example.tv", id: nil))
    }

    // MARK: the fields the feeds read

    static func macRelease(_ extra: [String: JSONValue]) throws(FieldError) -> Release {
        var body: [String: JSONValue] = [
            "platform": .string("macos"), "version": .string("1.0"), "releasedAt": .string("2026-01-01T00:00:00Z"),
        ]
        body.merge(extra) { $1 }
        return try CatalogInput.release(.object(body), now: Date())
    }

    static let signature = Data(repeating: 0xAB, count: 64).base64EncodedString()

    @Test func downloadFieldsAreValidatedOnWrite() throws {
        let signature = Self.signature
        let good = try Self.macRelease([
            "downloadURL": .string("https://example.com/a.zip"), "downloadLength": .number(JSONNumber(42)),
            "edSignature": .string(signature),
        ])
        #expect(good.downloadURL == "https://example.com/a.zip" && good.downloadLength == 42 && good.edSignature == signature)
        let app = try CatalogInput.app(.object([
            "id": .string("a"), "name": .string("A"), "bundleId": .object(["ios": .string("com.example.a")]),
        ]))
        #expect(app.bundleId == ["ios": "com.example.a"])
    }

    @Test(arguments: [
        ("downloadURL", JSONValue.string("itms-apps://x")), ("downloadURL", .string("/relative")),
        ("downloadLength", .number(JSONNumber(-1))), ("downloadLength", .number(JSONNumber(1.5))),
        ("edSignature", .string(Data(repeating: 1, count: 63).base64EncodedString())),
        ("edSignature", .string(String(UpdateFeedsTests.signature.dropLast(2)))),  // unpadded
        ("edSignature", .string("-" + UpdateFeedsTests.signature.dropFirst())),  // the URL-safe alphabet
        ("edSignature", .string(UpdateFeedsTests.signature.dropLast(3) + "x==")),  // stray bits before the padding
    ])
    func aBadDownloadFieldIsRefusedByName(_ field: String, value: JSONValue) {
        #expect(throws: FieldError.self, "\(field) \(value)") { try Self.macRelease([field: value]) }
        do { _ = try Self.macRelease([field: value]) } catch { #expect(error.field == field) }
    }
}
