import Foundation
import Testing
import UpshiftClient

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The network as the SDK sees it, answered in memory: checks get `decision`, event batches are kept
/// (by id, as the server would) and answered `200`, or `413` above `maximumBatch` events. The SDK's
/// requests against the real server are tested in `UpshiftServerTests/ClientSDKTests`.
final class FakeServer: UpshiftTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var _decision: CheckDecision
    private var _checks: [URLRequest] = []
    private var _events: [[String: JSONValue]] = []
    private var _batches: [Int] = []
    var maximumBatch = Int.max
    var down = false
    /// Batches answered before the network goes down (nil: no limit).
    var batchesBeforeDown: Int? {
        get { lock.withLock { _batchesBeforeDown } }
        set { lock.withLock { _batchesBeforeDown = newValue } }
    }
    private var _batchesBeforeDown: Int?
    /// Posts are received and never answered (until the sending task is cancelled).
    var stallsPosts: Bool {
        get { lock.withLock { _stallsPosts } }
        set { lock.withLock { _stallsPosts = newValue } }
    }
    private var _stallsPosts = false
    private var _posts = 0
    /// Event posts received (answered or not).
    var posts: Int { lock.withLock { _posts } }

    init(decision: CheckDecision = FakeServer.decision(.none)) {
        _decision = decision
    }

    var decision: CheckDecision {
        get { lock.withLock { _decision } }
        set { lock.withLock { _decision = newValue } }
    }
    var checks: [URLRequest] { lock.withLock { _checks } }
    var events: [[String: JSONValue]] { lock.withLock { _events } }
    var batches: [Int] { lock.withLock { _batches } }

    /// A query parameter of the last check.
    func lastCheck(_ name: String) -> String? {
        guard let url = checks.last?.url, let items = URLComponents(url: url, resolvingAgainstBaseURL: false)?.queryItems
        else { return nil }
        return items.first { $0.name == name }?.value
    }

    func types() -> [String] {
        events.compactMap { if case .string(let type)? = $0["type"] { type } else { nil } }
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        if down { throw URLError(.notConnectedToInternet) }
        let url = request.url!
        if request.httpMethod == "POST" {
            let stalls = lock.withLock {
                _posts += 1
                return _stallsPosts
            }
            if stalls { try await Task.sleep(for: .seconds(3600)) }
            let refused = lock.withLock {
                guard let left = _batchesBeforeDown else { return false }
                _batchesBeforeDown = left - 1
                return left <= 0
            }
            if refused { throw URLError(.notConnectedToInternet) }
            var bytes = request.httpBody ?? Data()
            if request.value(forHTTPHeaderField: "Content-Encoding") == "gzip" { bytes = Data(try GzipTests.gunzip(Array(bytes))) }
            guard case .object(let body) = try JSONDecoder().decode(JSONValue.self, from: bytes),
                case .array(let batch)? = body["events"]
            else { return (Data(), Self.response(url, 400)) }
            if batch.count > maximumBatch { return (Data(), Self.response(url, 413)) }
            lock.withLock {
                _batches.append(batch.count)
                for case .object(let event) in batch where !_events.contains(where: { $0["id"] == event["id"] }) {
                    _events.append(event)
                }
            }
            return (Data(#"{"accepted":0,"duplicates":0,"rejected":0,"results":[]}"#.utf8), Self.response(url, 200))
        }
        let answer = lock.withLock {
            _checks.append(request)
            return _decision
        }
        return (try CatalogCoding.encoder().encode(answer), Self.response(url, 200))
    }

    static func response(_ url: URL, _ status: Int) -> HTTPURLResponse {
        HTTPURLResponse(url: url, statusCode: status, httpVersion: "HTTP/1.1", headerFields: [:])!
    }

    static func decision(_ action: CheckAction, latest: String = "2.0", updateURL: String? = nil) -> CheckDecision {
        var decision = CheckDecision(
            action: action, reason: action == .none ? .upToDate : action == .force ? .belowMinimum : .updateAvailable,
            installedVersion: "1.0", checkAfterSeconds: 3600)
        if action != .none {
            decision.latestVersion = latest
            decision.updateURL = updateURL
            decision.allowSkip = action == .soft
            decision.releaseNotes = [VersionNotes(version: latest, notes: ["Faster."])]
        }
        return decision
    }
}

/// The device's file system, made to fail on demand: reads of chosen files throw a permission error
/// (as on a device locked since its restart), writes can be refused; every write and append is counted,
/// with the lines each wrote.
final class FaultyFileSystem: UpshiftFileSystem, @unchecked Sendable {
    private let lock = NSLock()
    private let device = DeviceFileSystem()
    private var _locked = false
    private var _refuseWrites: Set<String> = []
    private var _writes: [String] = []
    private var _appends: [String] = []
    private var _lines: [String: Int] = [:]

    /// Every read throws `fileReadNoPermission`.
    var locked: Bool {
        get { lock.withLock { _locked } }
        set { lock.withLock { _locked = newValue } }
    }
    /// Writes of these file names throw.
    var refuseWrites: Set<String> {
        get { lock.withLock { _refuseWrites } }
        set { lock.withLock { _refuseWrites = newValue } }
    }
    var writes: [String] { lock.withLock { _writes } }
    var appends: [String] { lock.withLock { _appends } }
    /// Lines written to a file so far, by writes and appends.
    func linesWritten(to name: String) -> Int { lock.withLock { _lines[name, default: 0] } }

    func read(_ url: URL) throws -> Data? {
        if locked { throw CocoaError(.fileReadNoPermission) }
        return try device.read(url)
    }

    func write(_ data: Data, to url: URL) throws {
        try lock.withLock {
            if _locked || _refuseWrites.contains(url.lastPathComponent) { throw CocoaError(.fileWriteNoPermission) }
            _writes.append(url.lastPathComponent)
            _lines[url.lastPathComponent, default: 0] += data.filter { $0 == UInt8(ascii: "\n") }.count
        }
        try device.write(data, to: url)
    }

    func append(_ data: Data, to url: URL) throws {
        try lock.withLock {
            if _locked { throw CocoaError(.fileWriteNoPermission) }
            _appends.append(url.lastPathComponent)
            _lines[url.lastPathComponent, default: 0] += data.filter { $0 == UInt8(ascii: "\n") }.count
        }
        try device.append(data, to: url)
    }

    func move(_ url: URL, to destination: URL) throws { try device.move(url, to: destination) }
    func remove(_ url: URL) throws { try device.remove(url) }

    private var _excluded: Set<URL> = []
    /// The files the SDK kept out of backups.
    var excludedFromBackup: Set<URL> { lock.withLock { _excluded } }
    func excludeFromBackup(_ url: URL) { lock.withLock { _ = _excluded.insert(url.standardizedFileURL) } }
}

/// A clock the test moves.
final class TestClock: WallClock, @unchecked Sendable {
    private let lock = NSLock()
    private var current: Date

    init(_ start: Date = Date(timeIntervalSince1970: 1_780_000_000)) { current = start }

    func now() -> Date { lock.withLock { current } }
    func advance(_ seconds: TimeInterval) { lock.withLock { current += seconds } }
}

/// Lines the SDK logged.
final class Lines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    func append(_ line: String) { lock.withLock { stored.append(line) } }
    var lines: [String] { lock.withLock { stored } }
}

enum Fixture {
    /// A storage folder for one test, not yet created, inside one folder of the test process that is
    /// removed when the process exits (this target has the SDK alone, not the server's test support).
    static func directory() -> URL {
        root.appendingPathComponent("client-\(UUID().uuidString)")
    }

    private static let root: URL = {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-client-tests-\(getpid())")
        try? FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        atexit { try? FileManager.default.removeItem(at: Fixture.root) }
        return root
    }()

    static func configuration(
        version: String = "1.0", directory: URL, server: FakeServer = FakeServer(),
        fileSystem: any UpshiftFileSystem = DeviceFileSystem(), clock: TestClock = TestClock(), log: Lines = Lines()
    ) -> UpshiftConfiguration {
        var configuration = UpshiftConfiguration(
            appId: "expenses", platform: "ios", ingestKey: "ik_test", baseURL: URL(string: "https://upshift.test")!,
            storageDirectory: directory, appVersion: version, build: 7, osVersion: "17.4", locale: "en")
        configuration.transport = server
        configuration.fileSystem = fileSystem
        configuration.clock = clock
        configuration.log = { log.append($0) }
        configuration.isDebugBuild = false
        configuration.isPreview = false
        configuration.flushInterval = .seconds(3600)
        return configuration
    }

    /// An install that ran `version` once (launched as a fresh install, with `events` queued, nothing sent):
    /// its install id.
    @discardableResult
    static func installed(
        version: String = "1.0", in directory: URL, server: FakeServer = FakeServer(), events: [UpshiftEvent] = []
    ) async throws -> UUID {
        let sdk = Upshift(configuration: configuration(version: version, directory: directory, server: server))
        await sdk.launch(migrations: [], baseline: .freshInstall)
        for event in events { await sdk.record(event) }
        let install = try #require(await sdk.installId)
        await sdk.stop()
        return install
    }

    static func files(in directory: URL) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
    }

    static func bytes(of name: String, in directory: URL) -> Data? {
        try? Data(contentsOf: directory.appendingPathComponent(name))
    }
}

struct InjectedFailure: Error, CustomStringConvertible {
    var description: String { "injected failure" }
}
