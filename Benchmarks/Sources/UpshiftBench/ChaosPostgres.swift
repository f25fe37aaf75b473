import Foundation

/// The run's own PostgreSQL cluster, as `scripts/chaos` provisioned it (scripts/lib/postgres.sh with
/// `UPSHIFT_PG_FOLDER=.chaos/pg`): never the cluster of the tests or of `scripts/run`, since the run
/// restarts it.
struct ChaosPostgres {
    /// initdb, pg_ctl and postgres.
    let binaries: String
    /// The cluster folder: `data/`, `postgres.log`.
    let folder: String
    /// The cluster's owner: `postgres` when the run is root (initdb refuses root), else the user.
    let owner: String
    let port: Int

    static func current() throws -> ChaosPostgres {
        let variables = ProcessInfo.processInfo.environment
        func required(_ name: String) throws -> String {
            guard let value = variables[name], !value.isEmpty else {
                throw BenchFailure("\(name) is not set: run the chaos test with scripts/chaos, which provisions its cluster")
            }
            return value
        }
        guard let port = Int(try required("UPSHIFT_PG_PORT")) else { throw BenchFailure("UPSHIFT_PG_PORT is not a port") }
        return ChaosPostgres(
            binaries: try required("UPSHIFT_PG_BINDIR"), folder: try required("UPSHIFT_PG_DIR"),
            owner: try required("UPSHIFT_PG_USER"), port: port)
    }

    /// `pg_ctl restart -m immediate`: every backend ends at once without a checkpoint (as in a crash),
    /// then the cluster starts again, replays its WAL and accepts connections; pg_ctl waits for that.
    func restartImmediately(log file: String) throws {
        let status = try Detached.run(
            pgCtl([
                "-D", "\(folder)/data", "-l", "\(folder)/postgres.log", "-o", "-p \(port)", "-m", "immediate", "-w",
                "-t", "120", "restart",
            ]), log: file)
        guard status == 0 else {
            printTail(of: file, lines: 20)
            throw BenchFailure("pg_ctl restart -m immediate exited \(status) (log: \(file), \(folder)/postgres.log)")
        }
    }

    /// pg_ctl as the cluster's owner, from `/` (a folder the owner may not read would make it complain).
    private func pgCtl(_ arguments: [String]) -> Command {
        let pgCtl = "\(binaries)/pg_ctl"
        if owner != NSUserName() {
            return Command("runuser", ["-u", owner, "--", pgCtl] + arguments, directory: "/")
        }
        return Command(pgCtl, arguments, directory: "/")
    }
}

/// Runs a program that leaves a daemon behind (pg_ctl starting the postmaster) with no descriptor of this
/// process but standard input (/dev/null), output and error (a log file). Foundation's `Process` cannot:
/// on Linux it learns that a child ended when a socket it hands the child is closed, and the postmaster,
/// inheriting it, would keep it open for its whole life, so that `pg_ctl` never seemed to end. Any other
/// descriptor inherited (a server's socket of the same kind, a connection) would outlive its owner too.
enum Detached {
    /// Runs `command` to its end; its exit status (128 + the signal when a signal ended it).
    static func run(_ command: Command, log file: String) throws -> Int32 {
        let path = try Processes.resolve(command.program)
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, file, O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        try GNUSpawn.closeFrom(&actions, 3)
        if let directory = command.directory { try GNUSpawn.changeDirectory(&actions, directory) }
        let environment = ProcessInfo.processInfo.environment.merging(command.environment) { $1 }
        let arguments = ([path] + command.arguments).map { strdup($0) } + [nil]
        let variables = environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer {
            for pointer in arguments + variables { free(pointer) }
        }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, arguments, variables)
        guard spawned == 0 else { throw BenchFailure("could not start \(path): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 {
            guard errno == EINTR else { throw BenchFailure("waitpid for \(path) failed: \(String(cString: strerror(errno)))") }
        }
        // WIFEXITED and WEXITSTATUS, which Swift does not import (they are macros).
        let signal = status & 0x7F
        return signal == 0 ? (status >> 8) & 0xFF : 128 + signal
    }
}

/// glibc's `posix_spawn_file_actions_addclosefrom_np` (2.34) and `_addchdir_np` (2.29), which Swift's Glibc
/// module leaves out (they are declared for _GNU_SOURCE only): looked up by name.
enum GNUSpawn {
    private typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
    private typealias ChangeDirectory = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, UnsafePointer<CChar>) -> Int32

    private static func function<T>(_ name: String, as type: T.Type) throws -> T {
        // RTLD_DEFAULT is a null handle in glibc.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), name) else {
            throw BenchFailure("\(name) is missing: the chaos run needs glibc 2.34 or later")
        }
        return unsafeBitCast(symbol, to: type)
    }

    static func closeFrom(_ actions: inout posix_spawn_file_actions_t, _ descriptor: Int32) throws {
        let status = try function("posix_spawn_file_actions_addclosefrom_np", as: CloseFrom.self)(&actions, descriptor)
        guard status == 0 else { throw BenchFailure("posix_spawn_file_actions_addclosefrom_np: \(String(cString: strerror(status)))") }
    }

    static func changeDirectory(_ actions: inout posix_spawn_file_actions_t, _ path: String) throws {
        let status = try function("posix_spawn_file_actions_addchdir_np", as: ChangeDirectory.self)(&actions, path)
        guard status == 0 else { throw BenchFailure("posix_spawn_file_actions_addchdir_np: \(String(cString: strerror(status)))") }
    }
}
