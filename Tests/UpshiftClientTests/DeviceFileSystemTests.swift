import Foundation
import Testing
import UpshiftClient

/// The device's file system: only "no such file" is a missing file. Tests run as root, for whom `chmod`
/// denies nothing, so the errors here are ones root gets too: a path through a regular file (`ENOTDIR`),
/// a directory where a file should be (`EISDIR`), a symbolic link to itself (`ELOOP`). For the last two
/// `FileManager.fileExists` answers false, which is why the SDK never asks it.
@Suite struct DeviceFileSystemTests {
    let fileSystem = DeviceFileSystem()
    let directory = Fixture.directory()

    @Test func onlyNoSuchFileIsMissing() throws {
        #expect(try fileSystem.read(directory.appendingPathComponent("state.json")) == nil)
        try fileSystem.write(Data("x".utf8), to: directory.appendingPathComponent("plain"))
        #expect(try fileSystem.read(directory.appendingPathComponent("plain")) == Data("x".utf8))
        #expect(try fileSystem.read(directory.appendingPathComponent("absent/state.json")) == nil)

        #expect(throws: (any Error).self) { try fileSystem.read(directory.appendingPathComponent("plain/state.json")) }
        let folder = directory.appendingPathComponent("folder")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { try fileSystem.read(folder) }
        let loop = try selfLink()
        #expect(throws: (any Error).self) { try fileSystem.read(loop) }
    }

    @Test func anAppendThatCannotOpenTheFileReplacesNothing() throws {
        let loop = try selfLink()
        #expect(throws: (any Error).self) { try fileSystem.append(Data("{}\n".utf8), to: loop) }
        #expect(try FileManager.default.destinationOfSymbolicLink(atPath: loop.path) == loop.path)
        try FileManager.default.createDirectory(at: directory.appendingPathComponent("queue.jsonl"), withIntermediateDirectories: true)
        #expect(throws: (any Error).self) { try fileSystem.append(Data("{}\n".utf8), to: directory.appendingPathComponent("queue.jsonl")) }

        // A missing file (and directory) is created; an existing one grows.
        let queue = directory.appendingPathComponent("new/queue.jsonl")
        try fileSystem.append(Data("a\n".utf8), to: queue)
        try fileSystem.append(Data("b\n".utf8), to: queue)
        #expect(try Data(contentsOf: queue) == Data("a\nb\n".utf8))
    }

    @Test func removingAndListingWhatIsNotThereIsNoError() throws {
        try fileSystem.remove(directory.appendingPathComponent("absent"))
        #expect(try fileSystem.contents(of: directory.appendingPathComponent("absent")).isEmpty)
        try fileSystem.write(Data("x".utf8), to: directory.appendingPathComponent("a"))
        #expect(try fileSystem.contents(of: directory).map(\.lastPathComponent) == ["a"])
        try fileSystem.move(directory.appendingPathComponent("a"), to: directory.appendingPathComponent("b"))
        #expect(try fileSystem.contents(of: directory).map(\.lastPathComponent) == ["b"])
        #expect(throws: (any Error).self) { try fileSystem.remove(directory.appendingPathComponent("b/c")) }
    }

    /// A symbolic link to itself.
    private func selfLink() throws -> URL {
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let link = directory.appendingPathComponent("loop.jsonl")
        try FileManager.default.createSymbolicLink(atPath: link.path, withDestinationPath: link.path)
        return link
    }
}
