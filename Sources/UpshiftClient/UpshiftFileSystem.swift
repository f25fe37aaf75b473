import Foundation

/// Where the SDK's files live. The default is the device's file system; tests pass one that fails the
/// way a locked device or a full disk does.
public protocol UpshiftFileSystem: Sendable {
    /// The file's bytes, or nil when there is no such file. Throws when it exists and cannot be read.
    func read(_ url: URL) throws -> Data?
    /// Replaces the file atomically (a crash leaves the old or the new file, never half of one).
    func write(_ data: Data, to url: URL) throws
    /// Adds `data` at the end of the file, creating it when missing.
    func append(_ data: Data, to url: URL) throws
    /// Renames a file; the destination is replaced.
    func move(_ url: URL, to destination: URL) throws
    /// Removes a file or a directory with everything in it; nothing when it does not exist.
    func remove(_ url: URL) throws
    /// What the directory holds; nothing when it does not exist. The default lists the device's directory.
    func contents(of directory: URL) throws -> [URL]
    /// Keeps the file out of device backups (`isExcludedFromBackup`); the default does so on Apple
    /// platforms and nothing elsewhere.
    func excludeFromBackup(_ url: URL)
}

extension UpshiftFileSystem {
    public func contents(of directory: URL) throws -> [URL] {
        try DeviceFileSystem().contents(of: directory)
    }

    public func excludeFromBackup(_ url: URL) {
        ApplePlatform.excludeFromBackup(url)
    }
}

/// The device's file system; on Apple platforms files are readable from the first unlock after a restart on.
/// Only "no such file" (`ENOENT`) makes a file missing: any other failure (no permission, a path through
/// a file, a directory where the file should be) is thrown, so that the SDK never takes a file it cannot
/// read for one that was never written.
public struct DeviceFileSystem: UpshiftFileSystem {
    public init() {}

    public func read(_ url: URL) throws -> Data? {
        do { return try Data(contentsOf: url) } catch where Self.isNoSuchFile(error) { return nil }
    }

    public func write(_ data: Data, to url: URL) throws {
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: url, options: Data.WritingOptions.atomic.union(ApplePlatform.fileProtection))
    }

    public func append(_ data: Data, to url: URL) throws {
        let handle: FileHandle
        do { handle = try FileHandle(forWritingTo: url) } catch where Self.isNoSuchFile(error) { return try write(data, to: url) }
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: data)
    }

    public func move(_ url: URL, to destination: URL) throws {
        try remove(destination)
        try FileManager.default.moveItem(at: url, to: destination)
    }

    public func remove(_ url: URL) throws {
        do { try FileManager.default.removeItem(at: url) } catch where Self.isNoSuchFile(error) {}
    }

    public func contents(of directory: URL) throws -> [URL] {
        do {
            return try FileManager.default.contentsOfDirectory(at: directory, includingPropertiesForKeys: nil)
        } catch where Self.isNoSuchFile(error) {
            return []
        }
    }

    /// Whether `error` says there is no such file (`ENOENT`, as the POSIX error Foundation wraps, or as
    /// Foundation's own code when it wraps none).
    static func isNoSuchFile(_ error: any Error) -> Bool {
        let error = error as NSError
        let noEntry = Int(POSIXError.Code.ENOENT.rawValue)
        if error.domain == NSPOSIXErrorDomain { return error.code == noEntry }
        if let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError, underlying.domain == NSPOSIXErrorDomain {
            return underlying.code == noEntry
        }
        return error.domain == NSCocoaErrorDomain
            && [CocoaError.Code.fileNoSuchFile.rawValue, CocoaError.Code.fileReadNoSuchFile.rawValue].contains(error.code)
    }
}
