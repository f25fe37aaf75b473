import Foundation
import Testing
import UpshiftClient

/// `queue.jsonl` is appended to: a new event, events taken off (sent, dropped from a full queue) are lines
/// added; the file is compacted only when most of it is dead. Writes are counted through the seam.
@Suite struct QueueFileTests {
    static func targets(_ server: FakeServer) -> [String] {
        server.events.compactMap { if case .string(let target)? = $0["targetVersion"] { target } else { nil } }
    }

    /// At capacity each `record` drops the oldest event: a line appended says so (and counts it), no
    /// rewrite of the queue or of the state per event.
    @Test func aFullQueueDropsTheOldestWithoutARewritePerEvent() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let fileSystem = FaultyFileSystem()
        var configuration = Fixture.configuration(directory: directory, server: server, fileSystem: fileSystem)
        configuration.queueCapacity = 100
        let sdk = Upshift(configuration: configuration)
        for index in 0..<100 { await sdk.record(.blocked(targetVersion: "1.\(index)")) }
        #expect(!fileSystem.writes.contains("queue.jsonl"))
        let stateWrites = fileSystem.writes.filter { $0 == "state.json" }.count
        let linesBefore = fileSystem.linesWritten(to: "queue.jsonl")

        for index in 100..<1_100 { await sdk.record(.blocked(targetVersion: "1.\(index)")) }
        #expect(await sdk.pendingEvents == 100)
        #expect(await sdk.droppedEvents == 1_000)
        let rewrites = fileSystem.writes.filter { $0 == "queue.jsonl" }.count
        #expect(rewrites > 0, "the dead lines are compacted away, the file does not grow for ever")
        #expect(rewrites <= 20, "a rewrite per event was \(rewrites)")
        // Lines written per event stay a handful, not the queue's length (100 here, 1,000 by default).
        #expect(fileSystem.linesWritten(to: "queue.jsonl") - linesBefore <= 4 * 1_000)
        #expect(fileSystem.writes.filter { $0 == "state.json" }.count == stateWrites)
        await sdk.stop()

        // What the next launch reads: the newest 100, in order, and the count.
        server.down = false
        let next = Upshift(configuration: configuration)
        #expect(await next.pendingEvents == 100)
        #expect(await next.droppedEvents == 1_000)
        await next.flush()
        #expect(Self.targets(server) == (1_000..<1_100).map { "1.\($0)" })
        #expect(await next.droppedEvents == 1_000)
        await next.stop()
    }

    /// A batch the server acknowledged is one line appended, not a rewrite of what is left; a launch
    /// after a crash reads exactly what was not sent; the file is compacted as the sent part outgrows the
    /// rest, and emptied at the end.
    @Test func acknowledgedBatchesAreMarkedNotRewritten() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        let fileSystem = FaultyFileSystem()
        var configuration = Fixture.configuration(directory: directory, server: server, fileSystem: fileSystem)
        configuration.batchSize = 100
        let sdk = Upshift(configuration: configuration)
        for index in 0..<1_000 { await sdk.record(.blocked(targetVersion: "1.\(index)")) }
        server.batchesBeforeDown = 3
        await sdk.flush()
        #expect(server.events.count == 300)
        #expect(await sdk.pendingEvents == 700)
        #expect(!fileSystem.writes.contains("queue.jsonl"))
        #expect(fileSystem.appends.filter { $0 == "queue.jsonl" }.count == 1_000 + 3)
        await sdk.stop()

        // The process dies here. The next launch reads the 700 not sent.
        server.batchesBeforeDown = nil
        let relaunchedFiles = FaultyFileSystem()
        configuration.fileSystem = relaunchedFiles
        let next = Upshift(configuration: configuration)
        #expect(await next.pendingEvents == 700)
        await next.flush()
        #expect(Self.targets(server) == (0..<1_000).map { "1.\($0)" })  // each once, in order
        #expect(await next.pendingEvents == 0)
        let rewrites = relaunchedFiles.writes.filter { $0 == "queue.jsonl" }.count
        #expect(rewrites >= 1 && rewrites <= 3, "\(rewrites) rewrites for 7 batches")
        // Rewriting what was left after each batch wrote 2,100 lines.
        #expect(relaunchedFiles.linesWritten(to: "queue.jsonl") < 1_000)
        #expect(Fixture.bytes(of: "queue.jsonl", in: directory)?.isEmpty == true)
        await next.stop()
    }

    /// The drop count of an SDK version that kept it in `state.json` moves to the queue file, once.
    @Test func theDropCountOfThePreviousSDKIsKeptOnce() async throws {
        let directory = Fixture.directory()
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        try Data(#"{"schemaVersion":2,"launchedVersion":"1.0","migratedThrough":"1.0","evictedEvents":5}"#.utf8)
            .write(to: directory.appendingPathComponent("state.json"))
        for _ in 0..<2 {
            let sdk = Upshift(configuration: Fixture.configuration(directory: directory))
            #expect(await sdk.droppedEvents == 5)
            await sdk.stop()
        }
        let state = String(decoding: Fixture.bytes(of: "state.json", in: directory) ?? Data(), as: UTF8.self)
        #expect(!state.contains("evictedEvents"))
    }
}
