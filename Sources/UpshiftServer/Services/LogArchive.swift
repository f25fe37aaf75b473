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
