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

    /// What an app that adds the package for `UpshiftClient` resolves: the package dependencies of the
    /// targets the product reaches, read from the manifest as SwiftPM evaluates it.
    @Test func theClientProductReachesNoOtherPackage() throws {
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
        let targets = try #require(manifest["targets"] as? [[String: Any]])
        let byName = Dictionary(uniqueKeysWithValues: targets.map { ($0["name"] as! String, $0) })
        let client = try #require(products.first { $0["name"] as? String == "UpshiftClient" })
        var pending = try #require(client["targets"] as? [String])
        var reached: Set<String> = []
        var packages: Set<String> = []
        while let name = pending.popLast() {
            guard reached.insert(name).inserted, let target = byName[name] else { continue }
            for dependency in target["dependencies"] as? [[String: Any]] ?? [] {
                if let local = (dependency["byName"] ?? dependency["target"]) as? [Any], let target = local.first as? String {
                    pending.append(target)
                } else if let product = dependency["product"] as? [Any] {
                    packages.insert(product.count > 1 ? "\(product[1])" : "?")
                }
            }
        }
        #expect(reached == ["UpshiftClient", "UpshiftWire"])
        #expect(packages.isEmpty)
        // And no executable product that would make an app resolve the server's packages.
        #expect(products.allSatisfy { ($0["type"] as? [String: Any])?["library"] != nil })
    }

    @Test func thePrivacyManifestDeclaresWhatTheSDKCollects() throws {
        let url = Self.root.appendingPathComponent("Sources/UpshiftClient/PrivacyInfo.xcprivacy")
        let plist = try #require(
            try PropertyListSerialization.propertyList(from: Data(contentsOf: url), format: nil) as? [String: Any])
        #expect(plist["NSPrivacyTracking"] as? Bool == false)
        #expect((plist["NSPrivacyTrackingDomains"] as? [Any])?.isEmpty == true)
        let collected = try #require(plist["NSPrivacyCollectedDataTypes"] as? [[String: Any]])
        let types = collected.compactMap { $0["NSPrivacyCollectedDataType"] as? String }
        #expect(Set(types) == ["NSPrivacyCollectedDataTypeDeviceID", "NSPrivacyCollectedDataTypeProductInteraction"])
        for entry in collected {
            #expect(entry["NSPrivacyCollectedDataTypeLinked"] as? Bool == false)
            #expect(entry["NSPrivacyCollectedDataTypeTracking"] as? Bool == false)
            #expect((entry["NSPrivacyCollectedDataTypePurposes"] as? [String])?.isEmpty == false)
        }
    }
}
