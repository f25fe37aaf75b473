// The non-SwiftUI half of docs/SDK.md's sample, word for word between the markers (checked below): it
// compiles here, on Linux, in a target that depends on UpshiftClient alone.
// BEGIN SAMPLE
import Foundation
import UpshiftClient

/// One Upshift and one presenter for the whole app.
@MainActor
final class Updates {
    static let shared = Updates()

    let upshift: Upshift
    let presenter: UpshiftPresenter

    init(
        storage: URL = FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
            .appendingPathComponent("Upshift")
    ) {
        var configuration = UpshiftConfiguration(
            appId: "expenses", platform: "ios", ingestKey: "upshift_ingest_…",
            baseURL: URL(string: "https://upshift.example.com")!, storageDirectory: storage)
        configuration.appStoreId = "1234567890"
        upshift = Upshift(configuration: configuration)
        presenter = UpshiftPresenter(upshift: upshift)
    }

    /// Once per launch, early: detects an update, runs the migration steps due, then asks what to show.
    func start() async {
        let report = await upshift.launch(
            migrations: [
                MigrationStep(version: "2.0") { try await Database.shared.addReceiptsTable() },
                MigrationStep(version: "2.3") { try await Database.shared.reindexCategories() },
            ],
            // This is the first release with the SDK: a user who had the app before has a database of 1.9.
            baseline: .inspect { await Database.shared.exists ? .existingData(version: "1.9") : .freshInstall })
        if let step = report.stepFailed {
            print("migration to \(step) failed, retried next launch: \(report.stepError ?? "")")
        }
        Task { await presenter.follow() }
        await presenter.show(await upshift.check())
    }
}
// END SAMPLE

import Testing

/// The app's own database, as the sample uses it.
actor Database {
    static let shared = Database()
    var exists = false
    private(set) var steps: [String] = []

    func addReceiptsTable() throws { steps.append("receipts") }
    func reindexCategories() throws { steps.append("categories") }
}

@Suite struct SampleTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    @Test func theGuideShowsTheCodeThisTestCompiles() throws {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/SDK.md"), encoding: .utf8)
        let integration = try #require(guide.range(of: "## A complete integration"))
        let fence = try #require(guide.range(of: "```swift\n", range: integration.upperBound..<guide.endIndex))
        let end = try #require(guide.range(of: "```", range: fence.upperBound..<guide.endIndex))
        let source = try String(contentsOf: URL(fileURLWithPath: #filePath), encoding: .utf8)
        let begin = try #require(source.range(of: "// BEGIN SAMPLE\n"))
        let stop = try #require(source.range(of: "// END SAMPLE"))
        #expect(String(guide[fence.upperBound..<end.lowerBound]) == String(source[begin.upperBound..<stop.lowerBound]))
    }

    @MainActor
    @Test func theSampleStartsWithNothingToShow() async throws {
        let storage = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-sample-\(UUID())")
        let updates = Updates(storage: storage)
        #expect(updates.presenter.presentation == .none)
        #expect(updates.upshift.configuration.appStoreId == "1234567890")
        #expect(await updates.upshift.installId != nil)
        try? FileManager.default.removeItem(at: storage)
    }

    /// The `dependencies:` and `targets:` of docs/SDK.md's "Installation", as the guide prints them.
    static func installationBlock() throws -> String {
        let guide = try String(contentsOf: Self.root.appendingPathComponent("docs/SDK.md"), encoding: .utf8)
        let installation = try #require(guide.range(of: "## Installation"))
        let fence = try #require(guide.range(of: "```swift\n", range: installation.upperBound..<guide.endIndex))
        let end = try #require(guide.range(of: "```", range: fence.upperBound..<guide.endIndex))
        return String(guide[fence.upperBound..<end.lowerBound])
    }

    /// What an app that adds this package for `UpshiftClient` resolves: a throwaway app package (tools
    /// version 6.0) with docs/SDK.md's installation lines word for word, beside a checkout named
    /// `upshift` (a link to this one), resolved by SwiftPM itself. SwiftPM resolves the package
    /// dependencies of every library product of a dependency, so this holds only while `UpshiftClient` is
    /// the package's one library product and reaches no other package.
    @Test func anAppThatAddsTheSDKAsTheGuideShowsResolvesNoOtherPackage() throws {
        let block = try Self.installationBlock()
        #expect(block.contains(".package(path: \"../upshift\")"), "\(block)")
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-app-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let app = folder.appendingPathComponent("MyApp")
        try FileManager.default.createDirectory(at: app.appendingPathComponent("Sources/MyApp"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent("upshift"), withDestinationURL: Self.root)
        let manifest = """
            // swift-tools-version:6.0
            import PackageDescription

            let package = Package(
                name: "MyApp",
                platforms: [.iOS(.v17), .macOS(.v15)],
            \(block))
            """
        try manifest.write(to: app.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        try "import UpshiftClient\n".write(to: app.appendingPathComponent("Sources/MyApp/App.swift"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", app.path, "resolve"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let log = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(log)")
        // No Package.resolved, or one without pins.
        if let resolved = FileManager.default.contents(atPath: app.appendingPathComponent("Package.resolved").path) {
            let json = try #require(try JSONSerialization.jsonObject(with: resolved) as? [String: Any])
            let pins = (json["pins"] as? [[String: Any]]) ?? []
            #expect(pins.isEmpty, "the app resolved \(pins.compactMap { $0["identity"] as? String }): \(log)")
        }
    }

    /// The package's one library product is the SDK (an executable would be built by name only).
    @Test func theSDKIsThePackagesOnlyLibraryProduct() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        // A scratch path of its own: `swift test` holds the lock of the package's `.build`.
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-dump-\(UUID())")
        defer { try? FileManager.default.removeItem(at: scratch) }
        process.arguments = ["swift", "package", "--package-path", Self.root.path, "--scratch-path", scratch.path, "dump-package"]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        let manifest = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let products = try #require(manifest["products"] as? [[String: Any]])
        #expect(products.compactMap { $0["name"] as? String } == ["UpshiftClient"])
    }

    @Test func thePrivacyManifestDeclaresWhatTheSDKCollects() throws {
        let url = Self.root.appendingPathComponent("Sources/UpshiftClient/PrivacyInfo.xcprivacy")
        let plist = try #require(
            try PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil) as? [String: Any])
        #expect(plist["NSPrivacyTracking"] as? Bool == false)
        #expect((plist["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true)
        let collected = try #require(plist["NSPrivacyCollectedDataTypes"] as? [[String: Any]])
        let types = collected.compactMap { $0["NSPrivacyCollectedDataType"] as? String }
        #expect(Set(types) == [
            "NSPrivacyCollectedDataTypeDeviceID", "NSPrivacyCollectedDataTypeProductInteraction",
            "NSPrivacyCollectedDataTypeCrashData",
        ])
        for entry in collected {
            #expect(entry["NSPrivacyCollectedDataTypeTracking"] as? Bool == false)
            #expect((entry["NSPrivacyCollectedDataTypePurposes"] as? [String])?.isEmpty == false)
        }
        // `abnormal_exit`: the previous session of a version ended without the app saying so, reported with
        // the install id (linked), for analytics only.
        let crash = try #require(collected.first { $0["NSPrivacyCollectedDataType"] as? String == "NSPrivacyCollectedDataTypeCrashData" })
        #expect(crash["NSPrivacyCollectedDataTypeLinked"] as? Bool == true)
        #expect(crash["NSPrivacyCollectedDataTypePurposes"] as? [String] == ["NSPrivacyCollectedDataTypePurposeAnalytics"])
        for entry in collected where entry["NSPrivacyCollectedDataType"] as? String != "NSPrivacyCollectedDataTypeCrashData" {
            #expect(entry["NSPrivacyCollectedDataTypeLinked"] as? Bool == false)
        }
    }
}
