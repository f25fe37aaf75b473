import Foundation

/// A program to run: a path, or a name looked up on PATH, its arguments, and variables added to this
/// process's environment.
struct Command: CustomStringConvertible {
    var program: String
    var arguments: [String]
    var environment: [String: String]
    /// The working folder; this process's when nil.
    var directory: String?

    init(_ program: String, _ arguments: [String] = [], environment: [String: String] = [:], directory: String? = nil) {
        self.program = program
        self.arguments = arguments
        self.environment = environment
        self.directory = directory
    }

    var description: String { ([program] + arguments).joined(separator: " ") }
}

/// Where a child's standard output or error goes. Standard output stays the summary's: children print
/// to standard error at most.
enum Sink {
    case standardError
    case discard
    /// A file, emptied first.
    case file(String)
    /// A file, added to.
    case append(String)
}

/// A benchmark that cannot go on: what failed, and where to look.
struct BenchFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = "bench: " + description
    }
}

/// The processes this run started and has not yet seen end, so that a failure or a signal stops them
/// (the reference servers and `upshift serve` must not outlive the run).
final class ChildProcesses: @unchecked Sendable {
    static let shared = ChildProcesses()

    private let lock = NSLock()
    private var running: [Int32: RunningProcess] = [:]

    func add(_ process: RunningProcess) {
        lock.withLock { running[process.pid] = process }
    }

    func remove(_ process: RunningProcess) {
        _ = lock.withLock { running.removeValue(forKey: process.pid) }
    }

    /// Stops every process still running, newest first.
    func stopAll() {
        // Taken out at once, so that a signal during the run's own cleanup stops each process once.
        let processes = lock.withLock {
            defer { running.removeAll() }
            return running.values.sorted { $0.pid > $1.pid }
        }
        for process in processes {
            log("stopping \(process.what) \(process.pid)")
            _ = process.stop()
        }
    }

    /// On SIGINT or SIGTERM: stop the children, then exit as the signal would have.
    func stopOnSignals() {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
            source.setEventHandler {
                ChildProcesses.shared.stopAll()
                exit(128 + signalNumber)
            }
            source.resume()
            Self.signalSources.withLock { $0.append(source) }
        }
    }

    private static let signalSources = Protected<[any DispatchSourceSignal]>([])
}

/// A value behind a lock.
final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) -> T) -> T {
        lock.withLock { body(&value) }
    }
}

/// A child process this run started.
final class RunningProcess: @unchecked Sendable {
    let process: Process
    let what: String

    init(_ process: Process, what: String) {
        self.process = process
        self.what = what
    }

    var pid: Int32 { process.processIdentifier }
    var isRunning: Bool { process.isRunning }

    /// Waits for it to end; its exit status, 128 + the signal when a signal ended it (as a shell says).
    func wait() -> Int32 {
        process.waitUntilExit()
        ChildProcesses.shared.remove(self)
        return process.terminationReason == .uncaughtSignal ? 128 + process.terminationStatus : process.terminationStatus
    }

    /// SIGTERM (graceful: `upshift serve` writes what it holds), then up to `grace` seconds before SIGKILL.
    func stop(grace: Double = 30) -> Int32 {
        if process.isRunning { kill(pid, SIGTERM) }
        let deadline = Date().addingTimeInterval(grace)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.1) }
        if process.isRunning {
            log("\(what) \(pid) still running \(Int(grace)) s after SIGTERM; killing it")
            kill(pid, SIGKILL)
        }
        return wait()
    }
}

/// Runs programs with Foundation's `Process`.
enum Processes {
    /// Starts `command`; it runs on while this process goes on.
    static func start(
        _ command: Command, what: String? = nil, stdout: Sink = .standardError, stderr: Sink = .standardError,
        stdin: String? = nil
    ) throws -> RunningProcess {
        try launch(command, what: what, stdout: handle(stdout), stderr: handle(stderr), stdin: stdin)
    }

    /// Runs `command` to its end; its exit status.
    @discardableResult
    static func run(
        _ command: Command, stdout: Sink = .standardError, stderr: Sink = .standardError, stdin: String? = nil
    ) throws -> Int32 {
        try start(command, stdout: stdout, stderr: stderr, stdin: stdin).wait()
    }

    /// Runs `command` to its end and returns what it printed; fails unless it exits 0.
    static func output(_ command: Command, stderr: Sink = .standardError, stdin: String? = nil) throws -> String {
        String(decoding: try outputData(command, stderr: stderr, stdin: stdin), as: UTF8.self)
    }

    /// As `output`, as bytes.
    static func outputData(_ command: Command, stderr: Sink = .standardError, stdin: String? = nil) throws -> Data {
        let pipe = Pipe()
        let running = try launch(command, what: nil, stdout: pipe, stderr: handle(stderr), stdin: stdin)
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        let status = running.wait()
        guard status == 0 else { throw BenchFailure("\(command.program) exited with status \(status)") }
        return data
    }

    private static func launch(
        _ command: Command, what: String?, stdout: Any, stderr: Any, stdin: String?
    ) throws -> RunningProcess {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try resolve(command.program))
        process.arguments = command.arguments
        if let directory = command.directory { process.currentDirectoryURL = URL(fileURLWithPath: directory) }
        if !command.environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(command.environment) { $1 }
        }
        process.standardOutput = stdout
        process.standardError = stderr
        let input = stdin.map { _ in Pipe() }
        process.standardInput = input ?? FileHandle.nullDevice
        do {
            try process.run()
        } catch {
            throw BenchFailure("could not start \(command.program): \(error)")
        }
        let running = RunningProcess(process, what: what ?? command.program)
        ChildProcesses.shared.add(running)
        if let input, let stdin {
            input.fileHandleForWriting.write(Data(stdin.utf8))
            try? input.fileHandleForWriting.close()
        }
        return running
    }

    /// The path of a program: as given when it holds a "/", else the first match on PATH.
    static func resolve(_ program: String) throws -> String {
        if program.contains("/") { return program }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") {
            let candidate = "\(folder)/\(program)"
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        throw BenchFailure("\(program) is not installed (scripts/bench installs it)")
    }

    private static func handle(_ sink: Sink) throws -> FileHandle {
        switch sink {
        case .standardError:
            return FileHandle.standardError
        case .discard:
            return FileHandle.nullDevice
        case .file(let path):
            guard FileManager.default.createFile(atPath: path, contents: nil),
                  let handle = FileHandle(forWritingAtPath: path) else { throw BenchFailure("cannot write \(path)") }
            return handle
        case .append(let path):
            if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
            guard let handle = FileHandle(forWritingAtPath: path) else { throw BenchFailure("cannot write \(path)") }
            handle.seekToEndOfFile()
            return handle
        }
    }
}

/// "bench: ..." on standard error: what the run is doing.
func log(_ message: String) {
    FileHandle.standardError.write(Data("bench: \(message)\n".utf8))
}
