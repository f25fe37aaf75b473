import Foundation
import NIOCore
import NIOPosix
import UpshiftCore
import UpshiftStore

/// A closed month of the event log as files (docs/OPERATIONS.md, "Archives of closed months"):
/// `event_log_YYYY_MM.copy.gz`, every event of the month in `COPY`'s text format (the columns of
/// ``EventExporter/archiveColumns``), gzipped; beside it `.sha256` (as `sha256sum -c` reads it) and `.rows`
/// (the count). The server writes the format itself from a `SELECT`: PostgreSQL's `COPY … TO` would write
/// on the database's host. Each file is written under a temporary name, synced and renamed, so a file
/// with its final name is whole.
public enum LogArchive {
    public struct Written: Sendable, Equatable {
        public let file: URL
        public let rows: Int
        public let sha256: String
    }

    /// The month's file name, `event_log_2026_09.copy.gz`.
    public static func fileName(_ month: LogMonth) -> String {
        String(format: "event_log_%04d_%02d.copy.gz", month.year, month.month)
    }

    /// Writes `month` into `directory` and checks the rows written against the log's count. A month that
    /// may still receive events at `now` is a ``FieldError`` naming `field`; a folder that cannot be written
    /// (missing, full) fails with the system's reason and leaves no file behind.
    public static func write(
        _ month: LogMonth, into directory: URL, exporter: EventExporter, now: Date, field: String = "month"
    ) async throws -> Written {
        guard month.isClosed(at: now) else {
            throw FieldError(
                field, "\(month) may still receive events (up to 30 days old): it can be archived from \(Timestamp.format(month.closes))")
        }
        let file = directory.appendingPathComponent(fileName(month))
        var digest = SHA256Stream()
        let rows = try await WholeFile.write(file) { handle in
            let gzip = try GzipStream()
            func write(_ bytes: ByteBuffer) async throws {
                let data = Data(bytes.readableBytesView)
                digest.update(data)
                try await handle.write(data)
            }
            let rows = try await exporter.writeArchive(of: month) { try await write(try gzip.compress($0)) }
            try await write(try gzip.finish())
            let expected = try await exporter.count(of: month)
            guard rows == expected else {
                throw ArchiveMismatch(description: "\(month): wrote \(rows) rows, the log holds \(expected)")
            }
            return rows
        }
        let sha256 = digest.finish()
        _ = try await WholeFile.write(directory.appendingPathComponent(fileName(month) + ".sha256")) { handle in
            try await handle.write(Data("\(sha256)  \(fileName(month))\n".utf8))
        }
        _ = try await WholeFile.write(directory.appendingPathComponent(fileName(month) + ".rows")) { handle in
            try await handle.write(Data("\(rows)\n".utf8))
        }
        return Written(file: file, rows: rows, sha256: sha256)
    }

    /// The rows written differ from the log's count: the file is not kept.
    public struct ArchiveMismatch: Error, CustomStringConvertible {
        public let description: String
    }
}

extension LogArchive {
    /// Rewrites each archive in `directory` (`event_log_YYYY_MM.copy.gz`) that holds events of `installs`
    /// without them (docs/OPERATIONS.md, "Erasure of an install"): the file written whole under a temporary
    /// name and renamed, then its `.sha256` and `.rows`. The rows read are checked against the archive's
    /// `.rows` before the new file takes its name: an archive cut off or unreadable is left as it is and
    /// fails the call (the worker retries). An archive that holds none of them is read and left untouched.
    /// Returns the archives rewritten.
    public static func forget(_ installs: [(appId: AppID, installId: UUID)], in directory: URL) async throws -> [Written] {
        let keys = Set(installs.map { "\($0.appId)\t\($0.installId.uuidString.lowercased())" })
        let names = try await NIOThreadPool.singleton.runIfActive {
            try FileManager.default.contentsOfDirectory(atPath: directory.path)
                .filter { $0.wholeMatch(of: /event_log_[0-9]{4}_[0-9]{2}\.copy\.gz/) != nil }.sorted()
        }
        var rewritten: [Written] = []
        for name in names {
            let file = directory.appendingPathComponent(name)
            var digest = SHA256Stream()
            do {
                let kept = try await WholeFile.write(file) { handle in
                    try await rewrite(file, without: keys) { bytes in
                        let data = Data(bytes.readableBytesView)
                        digest.update(data)
                        try await handle.write(data)
                    }
                }
                let sha256 = digest.finish()
                _ = try await WholeFile.write(directory.appendingPathComponent(name + ".sha256")) { handle in
                    try await handle.write(Data("\(sha256)  \(name)\n".utf8))
                }
                _ = try await WholeFile.write(directory.appendingPathComponent(name + ".rows")) { handle in
                    try await handle.write(Data("\(kept)\n".utf8))
                }
                rewritten.append(Written(file: file, rows: kept, sha256: sha256))
            } catch is NothingToForget {
                continue
            }
        }
        return rewritten
    }

    /// The archive held none of the rows to forget: it keeps its file.
    private struct NothingToForget: Error {}

    /// Streams `file` through, gzipped again to `write`, without the rows whose app and install (COPY's
    /// fourth and sixth columns) are among `keys`; returns the rows kept. Throws ``NothingToForget`` when
    /// it dropped none, and ``ArchiveMismatch`` when the rows read differ from the `.rows` beside it.
    private static func rewrite(
        _ file: URL, without keys: Set<String>, to write: (ByteBuffer) async throws -> Void
    ) async throws -> Int {
        let input = try await NIOThreadPool.singleton.runIfActive { try FileHandle(forReadingFrom: file) }
        defer { try? input.close() }
        let (gunzip, gzip) = (try GunzipStream(), try GzipStream())
        var (kept, dropped) = (0, 0)
        var pending: [UInt8] = []
        var output = ByteBuffer()
        while true {
            let piece = try await NIOThreadPool.singleton.runIfActive { try input.read(upToCount: 1 << 20) ?? Data() }
            if piece.isEmpty { break }
            pending.append(contentsOf: try gunzip.decompress(ByteBuffer(bytes: piece)).readableBytesView)
            var start = pending.startIndex
            while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
                let line = pending[start...end]
                if keys.contains(installKey(of: line)) {
                    dropped += 1
                } else {
                    kept += 1
                    output.writeBytes(line)
                }
                start = end + 1
            }
            pending.removeSubrange(..<start)
            if output.readableBytes >= 1 << 20 {
                try await write(try gzip.compress(output))
                output.clear()
            }
        }
        guard dropped > 0 else { throw NothingToForget() }
        let listed = try await NIOThreadPool.singleton.runIfActive {
            Int(try String(contentsOf: file.appendingPathExtension("rows"), encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        guard pending.isEmpty, kept + dropped == listed else {
            throw ArchiveMismatch(
                description: "\(file.lastPathComponent): read \(kept + dropped) rows, its .rows says \(listed.map(String.init) ?? "nothing")")
        }
        try await write(try gzip.compress(output))
        try await write(try gzip.finish())
        return kept
    }

    /// `app_id` and `install_id` of a row in COPY's text format, separated by a tab.
    private static func installKey(of line: ArraySlice<UInt8>) -> String {
        var fields: [ArraySlice<UInt8>] = []
        var start = line.startIndex
        for index in line.indices where line[index] == UInt8(ascii: "\t") {
            fields.append(line[start..<index])
            start = index + 1
            if fields.count == 6 { break }
        }
        guard fields.count == 6 else { return "" }
        return String(decoding: fields[3], as: UTF8.self) + "\t" + String(decoding: fields[5], as: UTF8.self)
    }
}

/// A file that has its name only once it is whole: written to `FILE.partial`, synced, renamed, and its folder
/// synced; removed if anything fails. Every write, the sync and the rename run on NIO's blocking thread pool:
/// an `fsync` under a busy disk can take seconds, and on the concurrency pool's few threads it would hold
/// back every request of the process meanwhile.
public enum WholeFile {
    /// Appends to the file being written, off the concurrency pool.
    public struct Writer: Sendable {
        let handle: FileHandle

        public func write(_ data: Data) async throws {
            let handle = handle
            try await NIOThreadPool.singleton.runIfActive { try handle.write(contentsOf: data) }
        }
    }

    /// Writes `file` through `FILE.partial`: synced, renamed, and the folder synced, or removed on failure.
    public static func write<T>(_ file: URL, _ body: (Writer) async throws -> T) async throws -> T {
        let partial = file.appendingPathExtension("partial")
        let handle: FileHandle = try await NIOThreadPool.singleton.runIfActive {
            guard FileManager.default.createFile(atPath: partial.path, contents: nil) else {
                throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: partial.path])
            }
            return try FileHandle(forWritingTo: partial)
        }
        do {
            let value: T
            do {
                value = try await body(Writer(handle: handle))
            } catch {
                try? handle.close()
                throw error
            }
            try await NIOThreadPool.singleton.runIfActive {
                defer { try? handle.close() }
                try handle.synchronize()
                guard rename(partial.path, file.path) == 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
                let folder = open(file.deletingLastPathComponent().path, O_RDONLY)
                if folder >= 0 {
                    fsync(folder)
                    close(folder)
                }
            }
            return value
        } catch {
            try? FileManager.default.removeItem(at: partial)
            throw error
        }
    }
}
