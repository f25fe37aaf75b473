import AsyncHTTPClient
import Foundation
import NIOCore
import NIOPosix
import UpshiftStore
import UpshiftTestSupport

/// The real `upshift serve` executable, started as a child process.
final class ServerProcess: @unchecked Sendable {
    let process = Process()
    let port: Int
    let output: URL

    init(
        database: DatabaseSettings, port: Int, extraEnvironment: [String: String] = [:], workingDirectory: URL? = nil,
        arguments: [String] = []
    ) throws {
        self.port = port
        output = TestEnvironment.scratch("serve").appendingPathExtension("log")
        _ = FileManager.default.createFile(atPath: output.path, contents: nil)
        process.executableURL = try TestEnvironment.binary()
        process.arguments = ["serve"] + arguments
        var environment = ProcessInfo.processInfo.environment
        environment["DATABASE_URL"] = Harness.url(of: database)
        environment["UPSHIFT_HOST"] = "127.0.0.1"
        environment["UPSHIFT_PORT"] = String(port)
        environment["UPSHIFT_MIGRATIONS_DIR"] = TestEnvironment.migrationsDirectory.path
        environment["UPSHIFT_LOG_LEVEL"] = "info"
        // Test clients all speak from loopback: tests of the event limits set them.
        environment["UPSHIFT_EVENTS_RATE_LIMIT"] = "0"
        environment["UPSHIFT_EVENTS_KEY_RATE_LIMIT"] = "0"
        environment["UPSHIFT_READER_RATE"] = "0"
        environment["UPSHIFT_READER_CONCURRENCY"] = "10000"
        environment["UPSHIFT_BACKTEST_CONCURRENCY"] = "64"
        for (key, value) in extraEnvironment { environment[key] = value }
        process.environment = environment
        if let workingDirectory { process.currentDirectoryURL = workingDirectory }
        let handle = try FileHandle(forWritingTo: output)
        process.standardOutput = handle
        process.standardError = handle
    }

    /// Starts the process and waits until `/health/ready` answers 200.
    func start(timeout: Duration = .seconds(60)) async throws {
        try process.run()
        do {
            try await Waits.until("upshift serve ready on port \(port)", timeout: timeout, every: .milliseconds(100)) {
                if !process.isRunning { throw TestEnvironment.Missing(description: "upshift serve exited: \(log())") }
                let reply = try? await Server(port: port).request(.GET, "/health/ready", timeout: .seconds(1))
                return reply?.status == 200
            }
        } catch is Waits.TimedOut {
            throw TestEnvironment.Missing(description: "upshift serve did not become ready: \(log())")
        }
    }

    /// `kill -9`: no chance to flush anything.
    func kill9() {
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
    }

    /// SIGTERM, then the exit status once the process has ended; SIGKILL (status 9) when it is still
    /// running after `limit`, so that a shutdown that never ends fails the test instead of hanging it.
    func terminate(killAfter limit: Duration = .seconds(60)) async -> Int32 {
        kill(process.processIdentifier, SIGTERM)
        let deadline = ContinuousClock.now.advanced(by: limit)
        while process.isRunning {
            if ContinuousClock.now >= deadline { kill(process.processIdentifier, SIGKILL) }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return process.terminationStatus
    }

    func log() -> String {
        (try? String(contentsOf: output, encoding: .utf8)) ?? ""
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: output)
    }
}

/// A loopback port that refuses connections for as long as this value lives: a socket bound to it that never
/// listens. A port that is merely free now can be taken by another suite's listener within the minute a test
/// waits on it (a run saw `serve` told "the connection closed" instead of "connection refused").
final class RefusingPort: Sendable {
    let port: Int
    private let descriptor: Int32

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw HarnessError("socket() failed: errno \(errno)") }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let found = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(descriptor, address, length) == 0 && getsockname(descriptor, address, &length) == 0
            }
        }
        guard found else {
            close(descriptor)
            throw HarnessError("binding a loopback port failed: errno \(errno)")
        }
        self.descriptor = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(descriptor) }
}

/// A loopback port nobody listens on right now.
func freePort() async throws -> Int {
    let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        .bind(host: "127.0.0.1", port: 0).get()
    let port = channel.localAddress?.port ?? 0
    try await channel.close()
    return port
}
