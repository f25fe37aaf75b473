import Foundation
import UpshiftStore

#if canImport(Glibc)
    import Glibc
#endif

/// A PostgreSQL cluster of a test's own: its own folder and port on 127.0.0.1, never the shared test
/// cluster of `DATABASE_URL`, so that a test may stop it, pause its replay or replicate it. The server
/// binaries are found as scripts/lib/postgres.sh finds them; as root, every command runs as the
/// `postgres` user (initdb and pg_ctl refuse root), as the scripts do.
public struct PostgresCluster: Sendable {
    /// The folder of the cluster: `data/` and `postgres.log`.
    public let folder: URL
    public let port: Int
    public let binaries: URL

    public var dataDirectory: URL { folder.appendingPathComponent("data", isDirectory: true) }
    public var log: URL { folder.appendingPathComponent("postgres.log") }

    /// The database `name` of this cluster, as the superuser `postgres` (trust authentication).
    public func settings(database name: String = "upshift") -> DatabaseSettings {
        DatabaseSettings(host: "127.0.0.1", port: port, username: "postgres", database: name)
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The folder of `initdb`, `pg_ctl`, `postgres` and `pg_basebackup`: `UPSHIFT_PG_BINDIR` (which
    /// scripts/test exports when it provisions the cluster), else the newest
    /// `/usr/lib/postgresql/<major>/bin` (Debian keeps them off `PATH`), else the folder of
    /// `pg_config --bindir`'s answer or of `pg_ctl` on `PATH`. Nil when none holds them all.
    public static let binaryFolder: URL? = {
        let needed = ["initdb", "pg_ctl", "postgres", "pg_basebackup"]
        func usable(_ path: String) -> URL? {
            let folder = URL(fileURLWithPath: path, isDirectory: true)
            let complete = needed.allSatisfy {
                FileManager.default.isExecutableFile(atPath: folder.appendingPathComponent($0).path)
            }
            return complete ? folder : nil
        }
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["UPSHIFT_PG_BINDIR"], !configured.isEmpty {
            candidates.append(configured)
        }
        let majors = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += majors.sorted { $0.compare($1, options: .numeric) == .orderedDescending }
            .map { "/usr/lib/postgresql/\($0)/bin" }
        for path in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            candidates.append(String(path))
        }
        return candidates.lazy.compactMap(usable).first
    }()

    /// The user the clusters run as: `postgres` when this process is root, else nil (this process's user).
    static let clusterUser: (name: String, uid: uid_t, gid: gid_t)? = {
        guard getuid() == 0, let entry = getpwnam("postgres") else { return nil }
        return ("postgres", entry.pointee.pw_uid, entry.pointee.pw_gid)
    }()

    /// A folder for clusters, owned by the cluster user: remove it with ``removeFolder(_:)``.
    public static func makeFolder(prefix: String) throws -> URL {
        // /tmp, not TMPDIR: the cluster user must be able to reach it.
        let folder = URL(fileURLWithPath: "/tmp", isDirectory: true)
            .appendingPathComponent("\(prefix)-\(getpid())-\(UUID().uuidString.prefix(8))", isDirectory: true)
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        guard chmod(folder.path, 0o700) == 0 else { throw Failure(description: "chmod \(folder.path) failed") }
        if let user = clusterUser, chown(folder.path, user.uid, user.gid) != 0 {
            throw Failure(description: "cannot give \(folder.path) to \(user.name)")
        }
        return folder
    }

    public static func removeFolder(_ folder: URL) {
        try? FileManager.default.removeItem(at: folder)
    }

    /// A cluster in `folder` (made by ``makeFolder(prefix:)``) on `port`; nothing is created yet.
    public init(folder: URL, port: Int, binaries: URL) {
        self.folder = folder
        self.port = port
        self.binaries = binaries
    }

    /// `initdb` of a new cluster (trust authentication, UTF-8, C locale) that will listen on its port
    /// of 127.0.0.1 only (no Unix socket), with streaming replication allowed from 127.0.0.1, and
    /// `settings` (`name = value` lines) added to its configuration. Not started.
    public func initialize(settings: [String] = []) async throws {
        try await runAsOwner("mkdir", ["-m", "700", "-p", folder.path])
        try await runAsOwner(
            binaries.appendingPathComponent("initdb").path,
            ["-D", dataDirectory.path, "-U", "postgres", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"])
        let configuration =
            [
                "listen_addresses = '127.0.0.1'", "unix_socket_directories = ''", "wal_level = replica",
                "max_wal_senders = 4", "hot_standby = on", "hot_standby_feedback = on", "max_connections = 60",
                "shared_buffers = 32MB",
                // A cluster for one test: nothing in it has to survive a crash of the machine.
                "fsync = off",
            ] + settings
        try append(configuration, to: "postgresql.conf")
        // initdb's trust default already admits replication from loopback; said here, not assumed.
        try append(["host replication postgres 127.0.0.1/32 trust"], to: "pg_hba.conf")
    }

    /// Makes this cluster a streaming replica of `primary` (running): `pg_basebackup -R`, which writes
    /// `standby.signal` and `primary_conninfo`, with the WAL of the copy streamed. Not started.
    public func copy(asReplicaOf primary: PostgresCluster) async throws {
        try await runAsOwner("mkdir", ["-m", "700", "-p", folder.path])
        try await runAsOwner(
            binaries.appendingPathComponent("pg_basebackup").path,
            [
                "-h", "127.0.0.1", "-p", String(primary.port), "-U", "postgres", "-D", dataDirectory.path, "-R",
                "-X", "stream", "--checkpoint=fast", "--no-sync",
            ])
    }

    /// Starts the server on its port and waits until it accepts connections (`pg_ctl start -w`).
    public func start() async throws {
        do {
            // Through bash, which closes every descriptor but 0–2 first: Foundation learns that a child
            // ended when a socket it gave the child closes, and the server pg_ctl leaves running
            // would otherwise hold that socket open for as long as it runs.
            try await runAsOwner(
                "/bin/bash",
                [
                    "-c", #"for fd in $(ls /proc/$$/fd); do if [ "$fd" -gt 2 ]; then eval "exec $fd>&-"; fi; done; exec "$@""#,
                    "bash", binaries.appendingPathComponent("pg_ctl").path,
                    "-D", dataDirectory.path, "-l", log.path, "-o", "-p \(port)", "-w", "-t", "60", "start",
                ])
        } catch {
            throw Failure(description: "\(error)\n\(tail(of: log))")
        }
    }

    /// Stops the server: `fast` ends sessions and shuts down cleanly, `immediate` like a crash.
    public func stop(mode: String = "fast") async throws {
        try await runAsOwner(binaries.appendingPathComponent("pg_ctl").path, ["-D", dataDirectory.path, "-m", mode, "-w", "stop"])
    }

    /// Whether the server runs (`pg_ctl status`).
    public func isRunning() async -> Bool {
        (try? await runAsOwner(binaries.appendingPathComponent("pg_ctl").path, ["-D", dataDirectory.path, "status"])) != nil
    }

    /// The last lines of the server's log, for a failure message.
    public func logTail() -> String { tail(of: log) }

    private func tail(of file: URL) -> String {
        guard let data = FileManager.default.contents(atPath: file.path) else { return "(no log at \(file.path))" }
        return String(decoding: data, as: UTF8.self).split(separator: "\n").suffix(20).joined(separator: "\n")
    }

    /// Appends `lines` to a configuration file of the data folder (later lines win). The file keeps its
    /// owner: this process is either that owner or root.
    private func append(_ lines: [String], to file: String) throws {
        let handle = try FileHandle(forWritingTo: dataDirectory.appendingPathComponent(file))
        defer { try? handle.close() }
        try handle.seekToEnd()
        try handle.write(contentsOf: Data(("\n# added by PostgresCluster\n" + lines.joined(separator: "\n") + "\n").utf8))
    }

    /// Runs `program` as the cluster's owner (through `runuser` when this process is root) from `/`,
    /// and returns its output; a non-zero exit throws with the output.
    @discardableResult
    func runAsOwner(_ program: String, _ arguments: [String]) async throws -> String {
        let process = Process()
        if let user = Self.clusterUser {
            process.executableURL = URL(fileURLWithPath: Self.runuser)
            process.arguments = ["-u", user.name, "--", program] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: program.hasPrefix("/") ? program : "/usr/bin/env")
            process.arguments = program.hasPrefix("/") ? arguments : [program] + arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        // Output to a file, not a pipe: a server pg_ctl starts must not hold this process's pipe open.
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("pg-cluster-\(UUID().uuidString).out")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        defer { try? FileManager.default.removeItem(at: output) }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
        process.standardInput = FileHandle.nullDevice
        let status = try await process.runToEnd()
        try? handle.close()
        let text = String(decoding: FileManager.default.contents(atPath: output.path) ?? Data(), as: UTF8.self)
        guard status == 0 else {
            throw Failure(description: "\(([program] + arguments).joined(separator: " ")) exited \(status): \(text)")
        }
        return text
    }

    private static let runuser: String =
        ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser", "/bin/runuser"].first {
            FileManager.default.isExecutableFile(atPath: $0)
        } ?? "runuser"
}

extension Process {
    /// Runs the process to its end with its standard output and error in one pipe, read while it runs (so
    /// that it never waits on a full pipe): its exit status and what it printed.
    public func runPrinting() throws -> (status: Int32, printed: String) {
        let output = Pipe()
        standardOutput = output
        standardError = output
        try run()
        let printed = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        waitUntilExit()
        return (terminationStatus, printed)
    }

    /// Starts the process and waits, without blocking a thread, until it ends: its exit status.
    public func runToEnd() async throws -> Int32 {
        try await withCheckedThrowingContinuation { continuation in
            terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
            do { try run() } catch {
                terminationHandler = nil
                continuation.resume(throwing: error)
            }
        }
    }
}
