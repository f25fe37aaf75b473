import Foundation
import Testing
import UpshiftCore

/// How an answer of Apple's lookup API is read for the store import (``AppStoreImport``).
@Suite struct AppStoreAnswerTests {
    static let app = AppInfo(
        id: "expenses", name: "Expenses", defaultLocale: "de", bundleId: ["ios": "com.example.expenses"])

    static func answer(_ fields: [String: JSONValue]) -> [UInt8] {
        Array(try! JSONValue.object(["resultCount": 1, "results": .array([.object(fields)])]).data())
    }

    /// Apple's result for the app, with `changes` (`.null` removes a field).
    static func listing(_ changes: [String: JSONValue] = [:]) -> [String: JSONValue] {
        var fields: [String: JSONValue] = [
            "bundleId": "com.example.expenses", "version": "3.1.0", "currentVersionReleaseDate": "2026-10-01T08:00:00Z",
            "minimumOsVersion": "17.0", "releaseNotes": "Neu: Belege\r\n\r\n  Schneller  \n", "trackId": 1,
        ]
        for (key, value) in changes { fields[key] = value == .null ? nil : value }
        return fields
    }

    static func outcome(_ bytes: [UInt8], catalog: AppCatalog = AppCatalog(app: app)) -> AppStoreImport.Outcome {
        AppStoreImport.outcome(of: bytes, catalog: catalog, platform: "ios")
    }

    @Test func aNewValidVersionIsALiveReleaseWithTheStoresFields() throws {
        guard case .add(let release) = Self.outcome(Self.answer(Self.listing())) else {
            Issue.record("not added")
            return
        }
        #expect(release.platform == "ios")
        #expect(release.version.text == "3.1.0")
        #expect(release.releasedAt == Timestamp.parse("2026-10-01T08:00:00Z"))
        #expect(release.minimumOSVersion == Version("17"))
        // Notes in the app's default locale, a line each, blank lines and outer spaces left out.
        #expect(release.notes == ["de": ["Neu: Belege", "Schneller"]])
        #expect(release.status == .live && release.channel == .live && release.rolloutPercent == 100 && !release.rolloutPaused)
        // Neither minimum OS nor notes are required.
        guard case .add(let bare) = Self.outcome(Self.answer(Self.listing(["minimumOsVersion": .null, "releaseNotes": .null])))
        else {
            Issue.record("not added without minimum OS and notes")
            return
        }
        #expect(bare.minimumOSVersion == nil && bare.notes.isEmpty)
    }

    @Test func aVersionTheCatalogHoldsInAnySpellingOrStatusIsPresent() throws {
        var catalog = AppCatalog(app: Self.app)
        var withdrawn = Release(platform: "ios", version: Version("3.1")!, releasedAt: Date(timeIntervalSince1970: 0))
        withdrawn.status = .withdrawn
        catalog.upsert(withdrawn)
        #expect(Self.outcome(Self.answer(Self.listing()), catalog: catalog) == .present(Version("3.1")!))
    }

    @Test(arguments: [
        ("<html></html>", "not JSON"),
        ("[]", "no results array"),
        (#"{"results":{}}"#, "no results array"),
        (#"{"results":["x"]}"#, "not an object"),
        (#"{"results":[{"version":"3.1"},{"version":"3.2"}]}"#, "2 results"),
        (#"{"results":[{"bundleId":"com.example.expenses"}]}"#, "no version"),
        (#"{"results":[{"bundleId":"com.example.expenses","version":3.1}]}"#, "no version"),
        (#"{"results":[{"bundleId":"com.example.expenses","version":"3.1"}]}"#, "no currentVersionReleaseDate"),
    ])
    func aMalformedAnswerAddsNothing(_ body: String, _ reason: String) {
        guard case .refused(let text) = Self.outcome(Array(body.utf8)) else {
            Issue.record("\(body) was not refused")
            return
        }
        #expect(text.contains(reason), "\(text)")
    }

    @Test(arguments: [
        (["bundleId": "com.example.other"], "not the app's"),
        (["bundleId": .null], "no bundleId"),
        (["version": "3.1 (42)"], "not a valid version"),
        (["version": ""], "not a valid version"),
        (["version": "3.1.0.0.0.0.1"], "not a valid version"),
        (["currentVersionReleaseDate": "2026-10-01"], "currentVersionReleaseDate"),
        (["minimumOsVersion": "iOS 17"], "minimumOsVersion"),
        (["minimumOsVersion": 17], "minimumOsVersion"),
        (["releaseNotes": ["a"]], "releaseNotes"),
    ] as [([String: JSONValue], String)])
    func aWrongFieldAddsNothingAndIsNamed(_ changes: [String: JSONValue], _ reason: String) {
        guard case .refused(let text) = Self.outcome(Self.answer(Self.listing(changes))) else {
            Issue.record("\(changes) was not refused")
            return
        }
        #expect(text.contains(reason), "\(text)")
    }

    @Test func noResultIsNotListed() {
        #expect(Self.outcome(Array(#"{"resultCount":0,"results":[]}"#.utf8)) == .notListed)
    }

    /// Apple's notes may be longer than the catalog takes and hold what it refuses: they are fitted.
    @Test func notesAreFittedToTheCatalogsLimits() {
        let long = String(repeating: "é", count: 1_500)
        let many = (1...60).map { "line \($0)" }.joined(separator: "\n")
        guard case .add(let release) = Self.outcome(Self.answer(Self.listing(["releaseNotes": .string("a\u{0}b\u{FFFF}c\n" + long + "\n" + many)])))
        else {
            Issue.record("not added")
            return
        }
        let lines = release.notes["de"] ?? []
        #expect(lines.count == CatalogInput.maximumNoteLines)
        #expect(lines[0] == "abc")
        #expect(lines[1].unicodeScalars.count == CatalogInput.maximumNoteLength)
        #expect(lines[1].hasSuffix("…"))
        #expect(lines.last == "…")
        #expect(lines[2] == "line 1")
    }

    @Test func platformsAndBundleIdsTheLookupCannotAnswerAreSaid() {
        #expect(AppStoreImport.unsupported(Self.app, platform: "ios") == nil)
        #expect(AppStoreImport.unsupported(Self.app, platform: "tvos")?.contains("no bundle id for tvos") == true)
        #expect(AppStoreImport.unsupported(Self.app, platform: "android")?.contains("not android") == true)
    }

    @Test func theURLAsksForTheBundleIdAndThePlatformsEntity() {
        let base = "https://itunes.apple.com/lookup"
        #expect(AppStoreImport.url(base: base, bundleId: "com.example.app", platform: "ios") == base + "?bundleId=com.example.app")
        #expect(
            AppStoreImport.url(base: base, bundleId: "com.example.app", platform: "macos")
                == base + "?bundleId=com.example.app&entity=macSoftware")
        #expect(
            AppStoreImport.url(base: base + "?country=de", bundleId: "a&b=c d", platform: "tvos")
                == base + "?country=de&bundleId=a%26b%3Dc%20d&entity=tvSoftware")
    }
}
