import ArgumentParser
import BenchmarkKit
import Foundation

/// What `scripts/bench` hands over, in the environment: the checkout, the release binary of `upshift`,
/// and the PostgreSQL server (scripts/lib/postgres.sh).
struct BenchEnvironment {
    let root: String
    let upshift: String
    let databaseURL: DatabaseURL

    static func current() throws -> BenchEnvironment {
        let variables = ProcessInfo.processInfo.environment
        func required(_ name: String) throws -> String {
            guard let value = variables[name], !value.isEmpty else {
                throw BenchFailure("\(name) is not set: run the benchmarks with scripts/bench, which sets it")
            }
            return value
        }
        return BenchEnvironment(
            root: try required("UPSHIFT_ROOT"), upshift: try required("UPSHIFT_BIN"),
            databaseURL: DatabaseURL(try required("DATABASE_URL")))
    }

    /// The wrk scripts, pgbench scripts and SQL files of the benchmarks.
    func script(_ name: String) -> String { "\(root)/scripts/bench.d/\(name)" }

    var migrations: String { "\(root)/sql" }
}

/// One run of a benchmark: its output folder, its database, and the processes it drives.
final class Bench {
    let environment: BenchEnvironment
    /// `.bench/<subcommand>-<time>/`: every tool's raw output.
    let output: String
    /// The database this run recreated (each subcommand has its own).
    private(set) var database: DatabaseURL
    let cpus = ProcessInfo.processInfo.activeProcessorCount

    /// Creates `<folder>/<name>-<time>` (`.bench/` of the checkout unless told) and points
    /// `<folder>/<name>-latest` at it.
    init(_ name: String, environment: BenchEnvironment, folder: String = ".bench") throws {
        self.environment = environment
        let folder = "\(environment.root)/\(folder)"
        let base = "\(name)-\(Format.folderStamp(Date()))"
        output = "\(folder)/\(base)"
        database = environment.databaseURL
        let files = FileManager.default
        try files.createDirectory(atPath: output, withIntermediateDirectories: true)
        let latest = "\(folder)/\(name)-latest"
        try? files.removeItem(atPath: latest)
        try files.createSymbolicLink(atPath: latest, withDestinationPath: base)
        log("raw outputs: \(output)")
    }

    func path(_ file: String) -> String { "\(output)/\(file)" }

    var setupLog: String { path("setup.log") }

    // MARK: PostgreSQL

    /// psql on the run's database, unaligned and quiet, with synchronous_commit on as the server sets it.
    func psql(_ arguments: [String], stdin: String? = nil, stderr: Sink = .standardError) throws -> String {
        let command = Command(
            "psql", ["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", database.description] + arguments,
            environment: ["PGOPTIONS": "-c synchronous_commit=on"])
        do {
            return try Processes.output(command, stderr: stderr, stdin: stdin)
        } catch {
            throw BenchFailure("psql failed: \((arguments.last ?? "").prefix(200))")
        }
    }

    /// One statement; `separator` between the fields of a row (psql's `-F`).
    func sql(_ statement: String, separator: String? = nil) throws -> String {
        try psql((separator.map { ["-F", $0] } ?? []) + ["-c", statement])
    }

    func sqlInteger(_ statement: String) throws -> Int {
        try PsqlOutput.integer(sql(statement))
    }

    func sqlValue(_ statement: String) throws -> String {
        try PsqlOutput.value(sql(statement))
    }

    /// Drops and recreates the database `name`, and migrates it.
    func recreateDatabase(_ name: String) throws {
        let admin = environment.databaseURL.database("postgres")
        database = environment.databaseURL.database(name)
        log("recreating database \(name)")
        let status = try Processes.run(
            Command("psql", [
                "-X", "-q", "-v", "ON_ERROR_STOP=1", "-d", admin.description,
                "-c", "DROP DATABASE IF EXISTS \(name) WITH (FORCE)", "-c", "CREATE DATABASE \(name)",
            ]), stdout: .append(setupLog), stderr: .append(setupLog))
        guard status == 0 else {
            printTail(of: setupLog, lines: 50)
            throw BenchFailure("could not recreate \(name)")
        }
        try upshift(["migrate"])
    }

    /// Empties the event log and checkpoints, so that each case starts from the same state.
    func resetEvents() throws {
        _ = try sql("TRUNCATE event_log")
        checkpoint()
    }

    /// CHECKPOINT needs a superuser or pg_checkpoint; without it the cases are just a little noisier.
    func checkpoint() {
        if (try? psql(["-c", "CHECKPOINT"], stderr: .discard)) == nil {
            log("CHECKPOINT not permitted for this role; continuing")
        }
    }

    func countEvents() throws -> Int {
        try sqlInteger("SELECT count(*) FROM event_log")
    }

    /// fsync and synchronous_commit, for the head of a summary.
    func durability() throws -> Durability {
        Durability(fsync: try sqlValue("SHOW fsync"), synchronousCommit: try sqlValue("SHOW synchronous_commit"))
    }

    // MARK: upshift

    private var upshiftEnvironment: [String: String] {
        ["DATABASE_URL": database.description, "UPSHIFT_MIGRATIONS_DIR": environment.migrations]
    }

    /// The upshift CLI on the run's database, its output to setup.log.
    func upshift(_ arguments: [String]) throws {
        let status = try Processes.run(
            Command(environment.upshift, arguments, environment: upshiftEnvironment),
            stdout: .append(setupLog), stderr: .append(setupLog))
        guard status == 0 else {
            printTail(of: setupLog, lines: 20)
            throw BenchFailure("upshift \(arguments.prefix(3).joined(separator: " ")) failed (log: \(setupLog))")
        }
    }

    /// The upshift CLI on the run's database: what it printed (its errors to setup.log).
    func upshiftOutput(_ arguments: [String]) throws -> String {
        try Processes.output(
            Command(environment.upshift, arguments, environment: upshiftEnvironment), stderr: .append(setupLog))
    }

    /// `upshift keys create ...`: the secret, the last line it prints (kept out of the log).
    func createKey(_ arguments: [String]) throws -> String {
        let output = try Processes.output(
            Command(environment.upshift, ["keys", "create"] + arguments, environment: upshiftEnvironment),
            stderr: .append(setupLog))
        guard let secret = output.split(separator: "\n").last.map(String.init), !secret.isEmpty else {
            throw BenchFailure("keys create printed no secret")
        }
        return secret
    }

    /// Starts `upshift serve` on the run's database and `port` (a free one unless told), and waits until
    /// it is ready.
    func startServer(log file: String, settings: [String: String] = [:], port: Int? = nil) throws -> Server {
        let port = try port ?? freePort()
        var variables = upshiftEnvironment
        variables["UPSHIFT_HOST"] = "127.0.0.1"
        variables["UPSHIFT_PORT"] = "\(port)"
        variables["UPSHIFT_LOG_LEVEL"] = "warning"
        variables.merge(settings) { $1 }
        let process = try Processes.start(
            Command(environment.upshift, ["serve"], environment: variables), what: "upshift serve",
            stdout: .file(file), stderr: .append(file))
        let server = Server(process: process, url: "http://127.0.0.1:\(port)", log: file)
        try waitReady(process, url: server.url + "/health/ready", log: file)
        return server
    }

    /// Reads the server's CPU time and peak RSS, then stops it (SIGTERM: it writes what it holds first).
    func stop(_ server: Server) throws -> ServerUsage {
        let usage = try processUsage(server.process.pid)
        let status = server.process.stop()
        return ServerUsage(cpuSeconds: usage.cpuSeconds, peakRSSMiB: usage.peakRSSMiB, exitStatus: status)
    }

    /// Lines a server logged (at warning and above: it runs with UPSHIFT_LOG_LEVEL=warning).
    func logLines(_ server: Server) -> Int {
        let text = (try? String(contentsOfFile: server.log, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").count
    }

    // MARK: processes and the machine

    /// Waits until `url` answers 2xx, for 60 s at most, while `process` runs.
    func waitReady(_ process: RunningProcess, url: String, log file: String) throws {
        for _ in 0..<600 {
            let status = try Processes.run(
                Command("curl", ["-fsS", "-o", "/dev/null", "--max-time", "2", url]), stdout: .discard, stderr: .discard)
            if status == 0 {
                log("\(process.what) \(process.pid) ready (\(url))")
                return
            }
            if !process.isRunning {
                printTail(of: file, lines: 30)
                throw BenchFailure("\(process.what) exited before it was ready (log: \(file))")
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
        printTail(of: file, lines: 30)
        throw BenchFailure("\(process.what) not ready after 60 s (log: \(file))")
    }

    /// A TCP port nothing listens on, from 18080 on.
    func freePort() throws -> Int {
        for port in 18080..<18380 where Ports.isFree(port) { return port }
        throw BenchFailure("no free port in 18080-18379")
    }

    /// CPU seconds and peak RSS (VmHWM) of a running process.
    func processUsage(_ pid: Int32) throws -> (cpuSeconds: Double, peakRSSMiB: Double) {
        let stat = try String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8)
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        let cpu = try ProcFiles.cpuSeconds(processStat: stat, ticksPerSecond: sysconf(Int32(_SC_CLK_TCK)))
        let peak = ProcFiles.kilobytes("VmHWM", status: status) ?? 0
        return (cpu, (Double(peak) / 1024).rounded())
    }

    /// VmRSS of a running process, in MiB.
    func residentMiB(_ pid: Int32) throws -> Double {
        let status = try String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)
        return Double(ProcFiles.kilobytes("VmRSS", status: status) ?? 0) / 1_024
    }

    func cpuTicks() throws -> CPUTicks {
        try ProcFiles.cpuTicks(stat: String(contentsOfFile: "/proc/stat", encoding: .utf8))
    }

    func load() -> String {
        ProcFiles.load(loadavg: (try? String(contentsOfFile: "/proc/loadavg", encoding: .utf8)) ?? "")
    }

    func machine() -> MachineDescription {
        let cpuinfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let meminfo = (try? String(contentsOfFile: "/proc/meminfo", encoding: .utf8)) ?? ""
        return MachineDescription(
            cpus: cpus, cpuModel: ProcFiles.cpuModel(cpuinfo: cpuinfo), memory: ProcFiles.memory(meminfo: meminfo),
            load: load())
    }

    /// The checkout's commit, and whether tracked files changed since.
    func revision() -> String {
        let git = { (arguments: [String]) in
            try? Processes.output(Command("git", ["-C", self.environment.root] + arguments), stderr: .discard)
        }
        let commit = git(["rev-parse", "--short", "HEAD"])?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
        let changes = git(["status", "--porcelain", "--untracked-files=no"]) ?? ""
        return changes.isEmpty ? commit : commit + " + uncommitted changes"
    }

    /// What the head of every summary says, read when the summary is written.
    func facts(started: String, machine: MachineDescription, postgresVersion: String, durability: Durability) -> RunFacts {
        RunFacts(
            started: started, machine: machine, finishedLoad: load(), revision: revision(),
            postgresVersion: postgresVersion, durability: durability)
    }

    /// Writes the summary to summary.txt and standard output; fails the run when a must failed.
    func finish(_ summary: Summary) throws {
        try summary.text.write(toFile: path("summary.txt"), atomically: true, encoding: .utf8)
        FileHandle.standardError.write(Data("\n".utf8))
        FileHandle.standardOutput.write(Data(summary.text.utf8))
        if !summary.mustsHold { throw ExitCode.failure }
    }

    /// Adds a line to a raw output file.
    func note(_ line: String, to file: String) {
        guard let handle = FileHandle(forWritingAtPath: file) else { return }
        handle.seekToEndOfFile()
        handle.write(Data((line + "\n").utf8))
        try? handle.close()
    }
}

/// `upshift serve` of one case.
struct Server {
    let process: RunningProcess
    /// "http://127.0.0.1:PORT"
    let url: String
    let log: String

    /// The PORT of `url`.
    var port: Int { Int(url.split(separator: ":").last ?? "") ?? 0 }
}

/// The last `lines` lines of a file, on standard error.
func printTail(of file: String, lines: Int) {
    let text = (try? String(contentsOfFile: file, encoding: .utf8)) ?? ""
    let tail = text.split(separator: "\n", omittingEmptySubsequences: false).suffix(lines + 1).joined(separator: "\n")
    FileHandle.standardError.write(Data(tail.utf8))
}

enum Ports {
    /// Whether nothing listens on 127.0.0.1:`port` (a bind succeeds; SO_REUSEADDR lets connections of an
    /// earlier case in TIME_WAIT not count).
    static func isFree(_ port: Int) -> Bool {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socketFD >= 0 else { return false }
        defer { close(socketFD) }
        var one: Int32 = 1
        setsockopt(socketFD, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port)).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        return bound == 0
    }
}
