import Foundation
import Synchronization
import Testing
import UpshiftCore
import UpshiftServer
import UpshiftTestSupport

/// Slow and idle clients cannot hold a server's connections: each part of a request has a deadline
/// (here 1–2 s instead of the defaults), and a head has a size limit.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct ConnectionLimitsTests {
    static func configuration(_ harness: Harness) -> AppConfiguration {
        var configuration = harness.configuration()
        configuration.connections.headTimeout = .seconds(1)
        configuration.connections.bodyTimeout = .seconds(2)
        configuration.connections.idleTimeout = .seconds(2)
        // Hundreds of connections from one loopback address: no per-address limit here.
        configuration.check.ratePerClient.rate = 0
        return configuration
    }

    @Test func tricklingHeadsIdleConnectionsAndSlowBodiesAreClosedWhileOthersAreAnswered() async throws {
        let harness = try await Harness.make()
        try await harness.run(Self.configuration(harness)) { server in
            let endpoints = [
                ("/v1/apps/expenses/check", "application/json", ""),
                ("/dashboard/sign-in", "application/x-www-form-urlencoded", ""),
                ("/v1/events", "application/json", "Authorization: Bearer \(harness.ingestKey)\r\n"),
            ]
            // 100 idle connections, 100 heads that never end, and 100 bodies that never end on each of the
            // three endpoints that read a body from anyone.
            async let idle = Self.open(100, port: server.port) { _ in nil }
            async let trickling = Self.open(100, port: server.port) { _ in
                "GET /v1/apps/expenses/check?platform=ios&version=1.0 HTTP/1.1\r\nHost: x\r\n"
            }
            async let slowBodies = Self.open(300, port: server.port) { index in
                let (path, type, extra) = endpoints[index % 3]
                return "POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Type: \(type)\r\n\(extra)Content-Length: 100000\r\n\r\n{"
            }
            let (idleConnections, heads, bodies) = try await (idle, trickling, slowBodies)
            let started = ContinuousClock.now
            // Bytes keep arriving on every slow connection, one at a time, until the server closes it;
            // meanwhile another client asks the check, and is answered.
            var answered = 0
            while ContinuousClock.now - started < .seconds(15),
                (idleConnections + heads + bodies).contains(where: { !$0.isClosed })
            {
                for connection in heads { connection.push("X") }
                for connection in bodies { connection.push(" ") }
                let reply = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0", timeout: .seconds(5))
                #expect(reply.status == 200)
                answered += 1
                try await Task.sleep(for: .milliseconds(200))
            }
            let waited = ContinuousClock.now - started
            let idleOpen = idleConnections.filter { !$0.isClosed }.count
            let headsOpen = heads.filter { !$0.isClosed }.count
            let bodiesOpen = bodies.filter { !$0.isClosed }.count
            #expect(idleOpen == 0, "idle connections open after \(waited)")
            #expect(headsOpen == 0, "trickling heads open after \(waited)")
            #expect(bodiesOpen == 0, "slow bodies open after \(waited)")
            #expect(answered >= 3)
            // A slow head or body is told why (408, as a problem) while its bytes were still arriving.
            let toldWhy = heads.filter { $0.status == 408 && $0.answer.contains("urn:upshift:problem:request-timeout") }
            #expect(toldWhy.count == heads.count)
            for (index, connection) in bodies.enumerated() {
                #expect(connection.status == 408, "\(endpoints[index % 3].0): \(connection.answer.prefix(200))")
            }
            for connection in idleConnections + heads + bodies { await connection.close() }
        }
    }

    /// A client that asks for an answer larger than every buffer between it and the server, and never
    /// reads it, holds its connection no longer than the write timeout, while other clients are answered.
    @Test func aClientThatNeverReadsItsAnswerIsClosedWithinTheWriteTimeout() async throws {
        let harness = try await Harness.make()
        var configuration = Self.configuration(harness)
        configuration.connections.writeTimeout = .seconds(2)
        // Only the write timeout may close the connection here.
        configuration.connections.idleTimeout = .seconds(120)
        let releasedAt = Timestamp.format(harness.clock.now().addingTimeInterval(-86_400))
        try await harness.run(configuration) { server in
            // A check answer of about 8 MB: 40 releases, each with 50 lines of 1,000 four-byte characters.
            let lines = JSONValue.array(Array(repeating: .string(String(repeating: "😀", count: 1_000)), count: 50))
            for major in 1...40 {
                let release: JSONValue = [
                    "platform": "ios", "version": .string("\(major).0"), "releasedAt": .string(releasedAt), "notes": ["en": lines],
                ]
                let added = try await server.send(.POST, "/v1/apps/expenses/releases", key: harness.adminKey, json: release)
                #expect(added.status == 201)
            }
            let path = "/v1/apps/expenses/check?platform=ios&version=0.1"
            let stalled = try await RawConnection.open(port: server.port, reading: false)
            await stalled.send("GET \(path) HTTP/1.1\r\nHost: x\r\n\r\n")
            let started = ContinuousClock.now
            // Meanwhile others are answered: the whole answer, read.
            var answered = 0
            while ContinuousClock.now - started < .seconds(5) {
                let reply = try await server.request(.GET, path, timeout: .seconds(10))
                #expect(reply.status == 200)
                #expect(reply.body.count > 8_000_000)
                answered += 1
                try await Task.sleep(for: .milliseconds(300))
            }
            #expect(answered >= 3)
            // The server gave up on it: reading now, the client finds part of the answer, then the end.
            await stalled.startReading()
            try await Waits.until("the stalled connection closed", timeout: .seconds(10)) { stalled.isClosed }
            let answer = stalled.answer
            #expect(stalled.status == 200)
            let head = try #require(answer.range(of: "\r\n\r\n"))
            let length = answer[..<head.lowerBound].split(separator: "\r\n")
                .first { $0.lowercased().hasPrefix("content-length:") }
                .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
            let sent = answer.utf8.count - answer[..<head.upperBound].utf8.count
            #expect(try #require(length) > 8_000_000)
            #expect(sent < length ?? 0, "the whole answer arrived: the connection was not cut")
            await stalled.close()
        }
    }

    /// `count` connections opened at once, each sent its `start` (nil: nothing).
    static func open(_ count: Int, port: Int, start: @escaping @Sendable (Int) -> String?) async throws -> [RawConnection] {
        try await withThrowingTaskGroup(of: (Int, RawConnection).self) { group in
            for index in 0..<count {
                group.addTask {
                    let connection = try await RawConnection.open(port: port)
                    if let text = start(index) { await connection.send(text) }
                    return (index, connection)
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }.sorted { $0.0 < $1.0 }.map(\.1)
        }
    }

    @Test func aHeadOverItsLimitIs431AndAKeepAliveConnectionIsAnsweredAgain() async throws {
        let harness = try await Harness.make()
        try await harness.run(Self.configuration(harness)) { server in
            let big = try await RawConnection.open(port: server.port)
            await big.send("GET /v1/apps/expenses/check?platform=ios&version=1.0&pad=\(String(repeating: "a", count: 17_000)) HTTP/1.1\r\nHost: x\r\n\r\n")
            try await Waits.until("the big head's connection closed", timeout: .seconds(10)) { big.isClosed }
            #expect(big.status == 431)
            let headers = try await RawConnection.open(port: server.port)
            let padding = (0..<40).map { "X-Pad-\($0): \(String(repeating: "b", count: 500))\r\n" }.joined()
            await headers.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\(padding)\r\n")
            try await Waits.until("the many headers' connection closed", timeout: .seconds(10)) { headers.isClosed }
            #expect(headers.status == 431)

            // Under the limit, two requests on one connection, the second after a pause shorter than
            // the idle timeout: both answered.
            let keptAlive = try await RawConnection.open(port: server.port)
            await keptAlive.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            try await Task.sleep(for: .milliseconds(1_200))
            await keptAlive.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
            try await Waits.until("two answers on the kept-alive connection", timeout: .seconds(10)) {
                keptAlive.answer.components(separatedBy: "HTTP/1.1 200").count == 3
            }
            #expect(!keptAlive.isClosed)
            await keptAlive.close()
        }
    }

    /// A request answered before its body ended (a `404` needs no body) still ends in an idle timer: the
    /// connection that then goes quiet is closed, it does not hold its slot for ever.
    @Test func aConnectionAnsweredBeforeItsBodyEndedIsClosedWhenItThenGoesQuiet() async throws {
        let harness = try await Harness.make()
        try await harness.run(Self.configuration(harness)) { server in
            let early = try await RawConnection.open(port: server.port)
            await early.send("POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1\r\n\r\n")
            try await Waits.until("an answer to the early connection", timeout: .seconds(10)) { early.status != nil }
            #expect(early.status == 404)
            await early.send("{")
            let quiet = ContinuousClock.now
            try await Waits.until("the early connection closed", timeout: .seconds(8)) { early.isClosed }
            // Closed by the idle timeout (2 s here), not at once.
            #expect(ContinuousClock.now - quiet >= .seconds(1))
            await early.close()
        }
    }

    /// The real binary (Hummingbird's in-process test server leaves the connection limit out).
    @Test func connectionsBeyondTheLimitWaitInTheBacklogAndAreAnsweredLater() async throws {
        let harness = try await Harness.make()
        let port = try await freePort()
        let server = try ServerProcess(
            database: harness.database, port: port,
            extraEnvironment: ["UPSHIFT_MAX_CONNECTIONS": "3", "UPSHIFT_IDLE_TIMEOUT": "1"])
        try await server.start()
        try await Task.sleep(for: .milliseconds(1_500))  // the readiness probe's connection is closed as idle
        // Three connections in the middle of a request head hold every place.
        var held: [RawConnection] = []
        for _ in 0..<3 {
            let connection = try await RawConnection.open(port: port)
            await connection.send("GET /health/live HTTP/1.1\r\n")
            held.append(connection)
        }
        try await Task.sleep(for: .milliseconds(300))
        // The fourth is accepted by the kernel, not yet by the server: no answer, and no error.
        let waiting = try await RawConnection.open(port: port)
        await waiting.send("GET /health/live HTTP/1.1\r\nHost: x\r\n\r\n")
        try await Task.sleep(for: .milliseconds(1_000))
        #expect(waiting.status == nil)
        #expect(!waiting.isClosed)
        // When they go, the fourth is answered.
        for connection in held { await connection.close() }
        try await Waits.until("an answer to the waiting connection", timeout: .seconds(10)) { waiting.status != nil }
        #expect(waiting.status == 200)
        await waiting.close()
        #expect(await server.terminate() == 0)
    }
}
