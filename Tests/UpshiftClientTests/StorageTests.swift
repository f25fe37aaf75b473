import Foundation
import Testing
import UpshiftClient

/// The SDK's files: what it does when they are missing, cannot be read now, or make no sense. Tests run as
/// root, so `chmod` proves nothing: failures come through the file-system seam.
@Suite struct StorageTests {
    /// The queue file was appended to, never written anew: what it held (`before`) still begins it.
    static func expectAppendedOnly(
        _ before: Data, in directory: URL, _ fileSystem: FaultyFileSystem, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(!fileSystem.writes.contains("queue.jsonl"), sourceLocation: sourceLocation)
        #expect(Fixture.bytes(of: "queue.jsonl", in: directory)?.starts(with: before) == true, sourceLocation: sourceLocation)
    }

    @Test func aLockedDeviceChangesNothingAndTheSDKCatchesUpWhenItCanReadAgain() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let first = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server))
        await first.launch(migrations: [], baseline: .freshInstall)
        await first.record(.launched)
        let install = try #require(await first.installId)
        await first.stop()
        let before = Fixture.files(in: directory).map { ($0, Fixture.bytes(of: $0, in: directory)) }

        // Launched in the background before the first unlock: nothing can be read.
        let fileSystem = FaultyFileSystem()
        fileSystem.locked = true
        let ran = Lines()
        let steps = [MigrationStep(version: "1.1") { ran.append("1.1") }]
        let sdk = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, fileSystem: fileSystem))
        let report = await sdk.launch(migrations: steps, baseline: .freshInstall)
        #expect(report.storageUnavailable)
        #expect(await sdk.installId == nil)
        #expect(await sdk.isStorageAvailable == false)
        #expect(ran.lines.isEmpty)  // not marked done either: it runs once the files can be read
        await sdk.record(.promptShown(kind: .soft, targetVersion: "2.0"))
        server.down = false
        _ = await sdk.check()
        #expect(server.lastCheck("install") == nil)  // the install id is unknown: not made up
        await sdk.flush()
        #expect(server.events.isEmpty)
        let during = Fixture.files(in: directory).map { ($0, Fixture.bytes(of: $0, in: directory)) }
        #expect(during.map(\.0) == before.map(\.0))
        #expect(zip(during, before).allSatisfy { $0.1 == $1.1 })  // not one byte overwritten

        // Unlocked: the next call reads the files, completes the launch that waited, sends everything.
        fileSystem.locked = false
        await sdk.flush()
        #expect(await sdk.installId == install)
        #expect(ran.lines == ["1.1"])
        #expect(await sdk.lastLaunch?.updatedFrom == "1.0")
        #expect(await sdk.lastLaunch?.stepsRun == ["1.1"])
        #expect(Set(server.types()) == ["launched", "prompt_shown", "updated"])
        #expect(server.events.allSatisfy { $0["installId"] == .string(install.uuidString.lowercased()) })
        await sdk.stop()
    }

    @Test func aStateCutShortIsMovedAsideKeepingTheInstallIdAndTheHistoryUnknown() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let install = try await Fixture.installed(in: directory, server: server, events: [.launched])
        let state = try #require(Fixture.bytes(of: "state.json", in: directory))
        try state.prefix(state.count / 2).write(to: directory.appendingPathComponent("state.json"))
        let queue = try #require(Fixture.bytes(of: "queue.jsonl", in: directory))

        let ran = Lines()
        let steps = [MigrationStep(version: "1.1") { ran.append("1.1") }]
        let log = Lines()
        let fileSystem = FaultyFileSystem()
        let sdk = Upshift(
            configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, fileSystem: fileSystem, log: log))
        // A fresh-install baseline is not believed: the SDK ran here before.
        let report = await sdk.launch(migrations: steps, baseline: .freshInstall)
        #expect(await sdk.installId == install)
        #expect(report.dataVersionUnknown)
        #expect(ran.lines.isEmpty)
        #expect(Fixture.files(in: directory).contains { $0.hasPrefix("state.json.corrupt-") })
        #expect(log.lines.contains { $0.contains("moved aside") })
        // The queue is not overwritten: its event is still there, to the byte.
        #expect(await sdk.pendingEvents == 1)
        #expect(Fixture.bytes(of: "queue.jsonl", in: directory) == queue)
        #expect(!fileSystem.writes.contains("queue.jsonl") && !fileSystem.appends.contains("queue.jsonl"))
        #expect(!fileSystem.writes.contains("install-id"))
        await sdk.stop()

        // Not marked done: a baseline that can tell lets the step run on a later launch.
        let later = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory))
        let next = await later.launch(migrations: steps, baseline: .existingData(version: "1.0"))
        #expect(next.stepsRun == ["1.1"])
        #expect(ran.lines == ["1.1"])
        await later.stop()
    }

    @Test func aStateWithoutSomeFieldsOrWithUnknownOnesLoads() async throws {
        let directory = Fixture.directory()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        // Written by an older SDK (no schema version, no queue fields) with a field a newer one added.
        try Data(#"{"launchedVersion":"1.0","migratedThrough":"1.0","futureField":{"x":1}}"#.utf8)
            .write(to: directory.appendingPathComponent("state.json"))
        let install = "0190b0c4-6b7e-7c1d-9a2b-3c4d5e6f7a8b"
        try Data(install.utf8).write(to: directory.appendingPathComponent("install-id"))
        let queue = Data(#"{"body":{"id":"0190b0c4-0000-7000-8000-000000000001","type":"launched"},"id":"0190b0c4-0000-7000-8000-000000000001"}"#.utf8 + [UInt8(ascii: "\n")])
        try queue.write(to: directory.appendingPathComponent("queue.jsonl"))
        let ran = Lines()
        let fileSystem = FaultyFileSystem()
        let sdk = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, fileSystem: fileSystem))
        let report = await sdk.launch(migrations: [MigrationStep(version: "1.1") { ran.append("1.1") }], baseline: .freshInstall)
        #expect(report.updatedFrom == "1.0")
        #expect(report.stepsRun == ["1.1"])
        #expect(await sdk.installId?.uuidString.lowercased() == install)
        #expect(await sdk.pendingEvents == 2)  // the stored event, and updated
        // Kept: the install id not rewritten, the queue appended to.
        #expect(!fileSystem.writes.contains("install-id"))
        Self.expectAppendedOnly(queue, in: directory, fileSystem)
        await sdk.stop()
    }

    @Test func aCorruptInstallIdIsMovedAsideAndReplacedKeepingTheStateAndTheQueue() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let old = try await Fixture.installed(in: directory, server: server, events: [.launched])
        try Data("not an id\n".utf8).write(to: directory.appendingPathComponent("install-id"))
        let queue = try #require(Fixture.bytes(of: "queue.jsonl", in: directory))

        let log = Lines()
        let ran = Lines()
        let fileSystem = FaultyFileSystem()
        let sdk = Upshift(
            configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, fileSystem: fileSystem, log: log))
        let report = await sdk.launch(migrations: [MigrationStep(version: "1.1") { ran.append("1.1") }], baseline: .freshInstall)
        let install = try #require(await sdk.installId)
        #expect(install != old)
        #expect(String(decoding: Fixture.bytes(of: "install-id", in: directory) ?? Data(), as: UTF8.self) == install.uuidString.lowercased())
        let aside = Fixture.files(in: directory).filter { $0.hasPrefix("install-id.corrupt-") }
        #expect(aside.count == 1)
        #expect(aside.first.flatMap { Fixture.bytes(of: $0, in: directory) } == Data("not an id\n".utf8))
        #expect(log.lines.contains { $0.contains("install-id cannot be read") })
        // The history is the state's, which is intact: an update from 1.0, its step run once.
        #expect(report.updatedFrom == "1.0")
        #expect(report.stepsRun == ["1.1"] && ran.lines == ["1.1"])
        // The queue is appended to (updated).
        #expect(await sdk.pendingEvents == 2)
        Self.expectAppendedOnly(queue, in: directory, fileSystem)
        await sdk.stop()
    }

    /// While the files cannot be read, every call tries them again, a property read included: the
    /// install id comes back without waiting for a check or a flush, and events recorded meanwhile
    /// reach the file.
    @Test func everyCallReadsTheFilesAgainWhileTheyCannotBeRead() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let install = try await Fixture.installed(in: directory, server: server)

        let fileSystem = FaultyFileSystem()
        fileSystem.locked = true
        let sdk = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server, fileSystem: fileSystem))
        #expect(await sdk.installId == nil)
        await sdk.record(.launched)
        #expect(await sdk.isStorageAvailable == false)
        fileSystem.locked = false
        #expect(await sdk.installId == install)
        #expect(await sdk.isStorageAvailable)
        await sdk.stop()
        let next = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server))
        #expect(await next.pendingEvents == 1)
        await next.stop()
    }

    /// A path through a regular file (`ENOTDIR`, which root gets too) is no missing file: the SDK runs
    /// in memory, makes up no install and runs no step, and catches up once the files are there.
    @Test func aFileSystemErrorOtherThanNoSuchFileIsUnavailableNeverMissing() async throws {
        let parent = Fixture.directory()
        let directory = parent.appendingPathComponent("Upshift")
        let install = try await Fixture.installed(in: directory)
        // The storage directory's parent becomes a regular file: every read fails with ENOTDIR.
        let kept = parent.deletingLastPathComponent().appendingPathComponent("kept-\(UUID().uuidString)")
        try FileManager.default.moveItem(at: parent, to: kept)
        try Data("a file".utf8).write(to: parent)

        let ran = Lines()
        let steps = [MigrationStep(version: "1.1") { ran.append("1.1") }]
        let sdk = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory))
        let report = await sdk.launch(migrations: steps, baseline: .existingData(version: "1.0"))
        #expect(report.storageUnavailable)
        #expect(await sdk.installId == nil)
        #expect(await sdk.isStorageAvailable == false)
        #expect(ran.lines.isEmpty)
        #expect(try Data(contentsOf: parent) == Data("a file".utf8))

        // The files are back: the next call reads them and the launch that waited completes.
        try FileManager.default.removeItem(at: parent)
        try FileManager.default.moveItem(at: kept, to: parent)
        await sdk.flush()
        #expect(await sdk.installId == install)
        #expect(await sdk.lastLaunch?.updatedFrom == "1.0")
        #expect(ran.lines == ["1.1"])
        await sdk.stop()
    }

    @Test func theFilesOfThePreviousSDKAreTakenOver() async throws {
        let directory = Fixture.directory()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let install = "0190b0c4-6b7e-7c1d-9a2b-3c4d5e6f7a8b"
        try Data(#"{"installId":"\#(install.uppercased())","launchedVersion":"1.0","migratedThrough":"1.0","skippedVersions":["1.5"]}"#.utf8)
            .write(to: directory.appendingPathComponent("state.json"))
        try Data(#"[{"id":"0190b0c4-0000-7000-8000-000000000001","body":{"id":"0190b0c4-0000-7000-8000-000000000001","type":"launched"}}]"#.utf8)
            .write(to: directory.appendingPathComponent("queue.json"))
        let server = FakeServer()
        let sdk = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server))
        #expect(await sdk.installId?.uuidString.lowercased() == install)
        #expect(await sdk.pendingEvents == 1)
        await sdk.flush()
        #expect(server.events.count == 1)
        #expect(server.events.first?["installId"] == .string(install))
        #expect(!Fixture.files(in: directory).contains("queue.json"))
        #expect(String(decoding: Fixture.bytes(of: "install-id", in: directory) ?? Data(), as: UTF8.self) == install)
        await sdk.stop()
    }

    @Test func aQueueLineCutShortLosesThatLineOnly() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let first = Upshift(configuration: Fixture.configuration(directory: directory, server: server))
        for _ in 0..<3 { await first.record(.launched) }
        await first.stop()
        let handle = try FileHandle(forWritingTo: directory.appendingPathComponent("queue.jsonl"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(#"{"id":"0190b0c4-0000-7000-8000-0000000"#.utf8))
        try handle.close()
        let log = Lines()
        let sdk = Upshift(configuration: Fixture.configuration(directory: directory, server: server, log: log))
        #expect(await sdk.pendingEvents == 3)
        #expect(log.lines.contains { $0.contains("1 unreadable lines") })
        await sdk.stop()
    }

    @Test func recordingAppendsAndOnlyASendRewritesTheQueue() async throws {
        let directory = Fixture.directory()
        let fileSystem = FaultyFileSystem()
        let server = FakeServer()
        let sdk = Upshift(configuration: Fixture.configuration(directory: directory, server: server, fileSystem: fileSystem))
        for _ in 0..<10 { await sdk.record(.launched) }
        #expect(fileSystem.appends.filter { $0 == "queue.jsonl" }.count == 10)
        #expect(!fileSystem.writes.contains("queue.jsonl"))
        await sdk.flush()
        #expect(fileSystem.writes.filter { $0 == "queue.jsonl" }.count == 1)
        #expect(server.events.count == 10)
        #expect(Fixture.bytes(of: "queue.jsonl", in: directory)?.isEmpty == true)
        await sdk.stop()
    }
    /// A device backup restored into a new container (another device): every file the SDK did not keep out
    /// of backups comes along, the install id does not. Events queued on the first device leave under its
    /// install id, those of the new one under the new id: none under another install's.
    @Test func aRestoredBackupSendsNoEventUnderAnotherInstallsId() async throws {
        let original = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let files = FaultyFileSystem()
        let first = Upshift(configuration: Fixture.configuration(directory: original, server: server, fileSystem: files))
        await first.launch(migrations: [], baseline: .freshInstall)
        await first.record(.launched)
        let firstId = try #require(await first.installId)
        let queued = await first.pendingEvents
        #expect(queued >= 1)  // ours at least, waiting for the server
        await first.stop()
        #expect(files.excludedFromBackup == [original.appendingPathComponent("install-id").standardizedFileURL])

        // The restore: every file but the excluded ones, into a new container.
        let restored = Fixture.directory()
        try FileManager.default.createDirectory(at: restored, withIntermediateDirectories: true)
        for url in try FileManager.default.contentsOfDirectory(at: original, includingPropertiesForKeys: nil)
        where !files.excludedFromBackup.contains(url.standardizedFileURL) {
            try FileManager.default.copyItem(at: url, to: restored.appendingPathComponent(url.lastPathComponent))
        }
        server.down = false
        let second = Upshift(configuration: Fixture.configuration(directory: restored, server: server))
        _ = await second.launch()
        await second.record(.launched)
        let secondId = try #require(await second.installId)
        #expect(secondId != firstId, "the install id is not restored: a new install")
        await second.flush()
        let sent = server.events
        #expect(sent.count > queued, "\(sent.map { $0["type"] ?? .null })")
        let byInstall = Dictionary(grouping: sent) { $0["installId"]?.stringValue ?? "none" }
        #expect(Set(byInstall.keys) == [firstId.uuidString.lowercased(), secondId.uuidString.lowercased()])
        #expect(byInstall[firstId.uuidString.lowercased()]?.count == queued, "the first device's events keep its id")
        await second.stop()
    }
}
