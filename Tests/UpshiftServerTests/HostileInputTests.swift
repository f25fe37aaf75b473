import Foundation
import Hummingbird
import NIOHTTP1
import Testing
import UpshiftCore
import UpshiftTestSupport

@testable import UpshiftServer

/// Every public input probed as an attacker would: numbers of every class in every numeric field of
/// every JSON body, text that is not Unicode or holds control characters in bodies, queries, paths and
/// headers, parameters sent twice. Nothing crashes, nothing is a 5xx, and a refusal names its field.
@Suite(.tags(.timed), .serverTimeLimit) struct HostileInputTests {
    /// A body's media type is read as HTTP writes it: parameters after `;`, spaces and tabs around the
    /// type, any ASCII case; nothing else passes for it.
    @Test func aContentTypeIsTheMediaTypeBeforeItsParametersInAnyCase() {
        for value in ["application/json", "Application/JSON", " application/json ; charset=utf-8", "\tapplication/json\t",
                      "application/json;charset=utf-8", "APPLICATION/JSON;"] {
            #expect(Request.contentType(value, is: "application/json"), "\(value)")
        }
        for value in ["", ";", "application/jsonx", "application/json x", "application /json", "text/json", "application/json\u{00A0}",
                      "\u{00A0}application/json", "application/jsoN\u{301}", "application/x-www-form-urlencoded"] {
            #expect(!Request.contentType(value, is: "application/json"), "\(value)")
        }
        #expect(Request.contentType("Application/X-WWW-Form-URLEncoded", is: "application/x-www-form-urlencoded"))
    }

    /// The classes of JSON numbers the issue names, as written on the wire, and decimals at and beyond
    /// the places a decimal field takes (`1e-400` once became 0, a rounding the fields must not do).
    static let numberClasses = [
        "1e19", "9223372036854775808", "1e308", "1e400", "-1", "1.5", "1.0", "1e2", "-0", String(repeating: "7", count: 400),
        "1e-400", "12.34", "1.234e1", "0.001", "0.005", "12.3450", "5e-324", "99.999", "0.1e-2",
    ]

    /// A numeric field: where it is, and the exact range it documents.
    struct NumericField: Sendable, CustomStringConvertible {
        enum Place: Sendable { case checkPost, event, release, releasePatch, policy }
        var place: Place
        var name: String
        var range: ClosedRange<Double>
        var integer: Bool
        /// Decimals a fractional field takes (the spec's `multipleOf`).
        var places = 0

        var description: String { "\(place) \(name)" }

        /// Whether the exact value of `literal` is one this field takes, and the value it is stored as.
        func accepts(_ literal: String) -> Double? {
            guard let value = Double(literal), value.isFinite, range.contains(value) else { return nil }
            // The 400-digit integer parses to 7.77e399 (not finite); "1.5" is not an integer; "1e-400"
            // parses to 0 but needs 400 decimals.
            if integer, value != value.rounded() { return nil }
            guard Self.decimals(literal) <= (integer ? 0 : places) else { return nil }
            return value == 0 ? 0 : value
        }

        /// How many digits after the point the exact value of a JSON number needs (`12.3450` 3, `1e-400` 400).
        static func decimals(_ literal: String) -> Int {
            let parts = literal.lowercased().split(separator: "e")
            let exponent = parts.count > 1 ? Int(parts[1]) ?? 0 : 0
            let mantissa = parts[0].split(separator: ".", omittingEmptySubsequences: false)
            guard mantissa.contains(where: { $0.contains(where: { $0 >= "1" && $0 <= "9" }) }) else { return 0 }
            let fraction = mantissa.count > 1 ? mantissa[1].reversed().drop(while: { $0 == "0" }).count : 0
            let integerZeros = fraction == 0 ? mantissa[0].reversed().prefix { $0 == "0" }.count : 0
            return max(0, fraction - exponent - integerZeros)
        }
    }

    static let numericFields: [NumericField] = [
        .init(place: .checkPost, name: "build", range: 0...9_007_199_254_740_991, integer: true),
        .init(place: .event, name: "build", range: 0...9_007_199_254_740_991, integer: true),
        .init(place: .release, name: "build", range: 0...9_007_199_254_740_991, integer: true),
        .init(place: .release, name: "rolloutPercent", range: 0...100, integer: false, places: 2),
        .init(place: .releasePatch, name: "build", range: 0...9_007_199_254_740_991, integer: true),
        .init(place: .releasePatch, name: "rolloutPercent", range: 0...100, integer: false, places: 2),
        .init(place: .policy, name: "notifyAfterDays", range: 0...3_650, integer: false, places: 3),
        .init(place: .policy, name: "blockAfterDays", range: 0...3_650, integer: false, places: 3),
        .init(place: .policy, name: "versionsBehindThreshold", range: 1...1_000, integer: true),
        .init(place: .policy, name: "remindIntervalSeconds", range: 0...31_536_000, integer: true),
        .init(place: .policy, name: "checkIntervalSeconds", range: 0...31_536_000, integer: true),
    ]

    @Test(arguments: numericFields)
    func everyClassOfNumberIsAcceptedExactlyWhenInRangeElseNamed(_ field: NumericField) async throws {
        let harness = try await Harness.make()
        let now = harness.clock.now()
        try await harness.run { server in
            var revision = 0
            if field.place == .releasePatch {
                let created = try await server.send(
                    .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                    json: .object(["platform": "ios", "version": "1.0", "releasedAt": "2026-01-01T00:00:00Z"]))
                #expect(created.status == 201)
                revision = 1
            }
            for (index, literal) in Self.numberClasses.enumerated() {
                let expected = field.accepts(literal)
                let reply: Server.Reply
                switch field.place {
                case .checkPost:
                    reply = try await Self.raw(
                        server, .POST, "/v1/apps/expenses/check", #"{"platform":"ios","version":"1.0","build":\#(literal)}"#)
                case .event:
                    let event = clientEvent(occurredAt: now)
                    let fields = event.map { "\"\($0.key)\":\"\($0.value)\"" }.joined(separator: ",")
                    reply = try await Self.raw(
                        server, .POST, "/v1/events", "{\"events\":[{\(fields),\"build\":\(literal)}]}", key: harness.ingestKey)
                case .release:
                    reply = try await Self.raw(
                        server, .POST, "/v1/apps/expenses/releases",
                        #"{"platform":"ios","version":"2.\#(index)","releasedAt":"2026-01-01T00:00:00Z","\#(field.name)":\#(literal)}"#,
                        key: harness.adminKey)
                case .releasePatch:
                    reply = try await Self.raw(
                        server, .PATCH, "/v1/apps/expenses/releases/ios/1.0", "{\"\(field.name)\":\(literal)}",
                        key: harness.adminKey, headers: [("If-Match", "\"\(revision)\"")])
                case .policy:
                    reply = try await Self.raw(
                        server, .PUT, "/v1/apps/expenses/policies/ios", "{\"enabled\":true,\"\(field.name)\":\(literal)}",
                        key: harness.adminKey, headers: [("If-Match", "\"\(revision)\"")])
                }
                let context = "\(field) = \(literal.prefix(30)): \(reply.status) \(String(decoding: reply.body.prefix(300), as: UTF8.self))"
                let body = try reply.value()
                if field.place == .event {
                    // Per event: the batch is answered, the event accepted or rejected naming the field.
                    #expect(reply.status == 200, "\(context)")
                    let result = body["results"]?.arrayValue?.first
                    if expected != nil {
                        #expect(result?["status"] == .string("accepted"), "\(context)")
                    } else {
                        #expect(result?["status"] == .string("rejected") && result?["field"] == .string("build"), "\(context)")
                    }
                    continue
                }
                if let expected {
                    #expect((200..<300).contains(reply.status), "\(context)")
                    // The next write sends the revision this one answered (a write that changes nothing keeps it).
                    if let etag = reply.etag, let next = Int(etag.trimmingCharacters(in: CharacterSet(charactersIn: "\""))) {
                        revision = next
                    }
                    // Stored as exactly that value (never clamped, rounded or truncated).
                    if field.place != .checkPost {
                        #expect(body[field.name]?.doubleValue == expected, "\(context)")
                        // And answered as exactly the decimal sent (`1.234e1` as 12.34), not a neighbour.
                        #expect(body[field.name] == .number(JSONNumber(literal: literal)!), "\(context)")
                    }
                } else {
                    #expect(reply.status == 400, "\(context)")
                    #expect(body["field"] == .string(field.name), "\(context)")
                }
            }
        }
    }

    /// Text a field refuses, as JSON escapes or raw bytes.
    static let badText: [(name: String, json: String)] = [
        ("NUL", #"a\u0000b"#), ("C0", #"a\u001fb"#), ("U+FFFE", #"a\ufffeb"#), ("U+FFFF", #"\uffff"#),
        ("unpaired surrogate", #"a\ud800b"#), ("lone low surrogate", #"\udc00"#), ("not UTF-8", "a\u{FFFD}b"),
    ]

    @Test func textThatIsNotAllowedIsRefusedNamingItsFieldInEveryBody() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            for bad in Self.badText {
                // `\u{FFFD}` stands for a raw 0xFF byte, which only a hand-made body can carry.
                func body(_ template: String) -> Data {
                    let text = template.replacingOccurrences(of: "BAD", with: bad.json)
                    var bytes = Array(text.utf8)
                    if bad.name == "not UTF-8" {
                        bytes = Array(text.replacingOccurrences(of: "\u{FFFD}", with: "\u{1}").utf8).map { $0 == 1 ? 0xFF : $0 }
                    }
                    return Data(bytes)
                }
                let cases: [(HTTPMethod, String, String, String, [(String, String)])] = [
                    (.POST, "/v1/apps", #"{"id":"x\#(bad.name.count)","name":"BAD"}"#, "name", []),
                    (.POST, "/v1/apps", #"{"id":"y\#(bad.name.count)","name":"n","storeId":{"ios":"BAD"}}"#, "storeId.ios", []),
                    (.POST, "/v1/apps/expenses/releases",
                     #"{"platform":"ios","version":"9.9","releasedAt":"2026-01-01T00:00:00Z","notes":{"en":["fine","BAD"]}}"#,
                     "notes.en[1]", []),
                    (.POST, "/v1/apps/expenses/releases",
                     #"{"platform":"ios","version":"9.8","releasedAt":"2026-01-01T00:00:00Z","updateURL":"https://x/BAD"}"#,
                     "updateURL", []),
                    (.PUT, "/v1/apps/expenses/policies/ios", #"{"enabled":true,"reason":"BAD"}"#, "reason", [("If-Match", "\"0\"")]),
                    (.PUT, "/v1/apps/expenses/policies/ios", #"{"enabled":true,"minimumVersion":"1.0BAD"}"#, "minimumVersion",
                     [("If-Match", "\"0\"")]),
                    (.POST, "/v1/apps/expenses/check", #"{"platform":"ios","version":"1.0","locale":"BAD"}"#, "locale", []),
                ]
                for (method, path, template, field, headers) in cases {
                    let reply = try await server.request(
                        method, path,
                        headers: [("Authorization", "Bearer \(harness.rootKey)"), ("Content-Type", "application/json")] + headers,
                        body: body(template))
                    let context = "\(bad.name) in \(field): \(reply.status) \(reply.text)"
                    #expect(reply.status == 400, "\(context)")
                    #expect(try reply.value()["field"] == .string(field), "\(context)")
                }
                // An event's own fields: that event is rejected, or, when the body is not Unicode text,
                // the batch is refused naming the member.
                let event = body(#"{"events":[{"id":"BAD","type":"launched"}]}"#)
                let reply = try await server.postEvents(body: event, key: harness.ingestKey)
                #expect(reply.status == 200 || reply.status == 400, "\(bad.name): \(reply.status)")
                if reply.status == 400 {
                    #expect(try reply.value()["field"] == .string("events[0].id"))
                } else {
                    let result = try reply.value()["results"]?.arrayValue?.first
                    #expect(result?["status"] == .string("rejected") && result?["field"] == .string("id"))
                }
            }
            // Tab, line feed and carriage return: only in notes and reasons.
            let notes = try await server.send(
                .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                json: .object([
                    "platform": "ios", "version": "3.0", "releasedAt": "2026-01-01T00:00:00Z",
                    "notes": .object(["en": .array([.string("line\none\tand\r\ntwo")])]), "reason": "why\nnot",
                ]))
            #expect(notes.status == 201)
            let name = try await server.send(
                .POST, "/v1/apps", key: harness.rootKey, json: .object(["id": "tabbed", "name": "a\tb"]))
            #expect(try name.status == 400 && name.value()["field"] == .string("name"))
        }
    }

    @Test func queryAndPathTextIsDecodedOnceAndStrictly() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let check = "/v1/apps/expenses/check?platform=ios"
            for (query, field) in [
                ("&version=1.0%00", "version"), ("&version=%FF", "version"), ("&version=1.0&locale=%ED%A0%80", "locale"),
                ("&version=1.0&locale=en%EF%BF%BE", "locale"), ("&version=1.0&install=%zz", "install"),
                ("&version=1.0&version=1.1", "version"), ("&version=1.0&install=a&install=b", "install"),
                ("&version=1.0&build=1.0", "build"), ("&version=1.0&build=-1", "build"), ("&version=1.0&build=99999999999999999999", "build"),
            ] {
                let reply = try await server.request(.GET, check + query)
                #expect(reply.status == 400, "\(query): \(reply.status)")
                #expect(try reply.value()["field"] == .string(field), "\(query)")
            }
            // Reports and history read their queries the same way.
            for path in [
                "/v1/apps/expenses/reports/adoption?platform=ios&platform=ios",
                "/v1/apps/expenses/reports/adoption?platform=i%00os", "/v1/apps/expenses/history?limit=1e2",
                "/v1/apps/expenses/history?limit=99999999999999999999999", "/v1/apps/expenses/history?before=%FF",
                // Days PostgreSQL cannot hold (there is no year 0), or before any event.
                "/v1/apps/expenses/reports/adoption?platform=ios&to=0001-01-01",
                "/v1/apps/expenses/reports/adoption?platform=ios&from=0000-01-01&to=0000-01-02",
                "/v1/apps/expenses/reports/adoption?platform=ios&from=1969-12-31",
            ] {
                let reply = try await server.send(.GET, path, key: harness.readKey)
                #expect(reply.status == 400, "\(path): \(reply.status)")
            }
            // The first days there are: the default `from` stops at 1970-01-01 (once the projections have
            // their first generations: before, a report is a 503 "retry shortly").
            try await harness.waitForProjections()
            let early = try await server.send(.GET, "/v1/apps/expenses/reports/adoption?platform=ios&to=1970-01-05", key: harness.readKey)
            #expect(early.status == 200, "\(early.status)")
            #expect(try early.value()["from"] == .string("1970-01-01"))
            // A version in a path is percent-decoded the same way on every route.
            _ = try await server.send(
                .POST, "/v1/apps/expenses/releases", key: harness.adminKey,
                json: .object(["platform": "ios", "version": "1.2.0+7", "releasedAt": "2026-01-01T00:00:00Z"]))
            let patch = try await server.send(
                .PATCH, "/v1/apps/expenses/releases/ios/1.2.0%2B7", key: harness.adminKey,
                json: .object(["rolloutPercent": 50]), headers: [("If-Match", "\"1\"")])
            #expect(patch.status == 200)
            let report = try await server.send(.GET, "/v1/apps/expenses/reports/releases/1.2%2B7?platform=ios", key: harness.readKey)
            #expect(report.status == 200 || report.status == 404, "\(report.status)")
            #expect(report.status != 400)
            for bad in ["1.0%00", "%FF", "1.0%2", "%E2%82"] {
                // As sent on the wire (an HTTP client library would re-encode some of these).
                let connection = try await RawConnection.open(port: server.port)
                await connection.send(
                    "PATCH /v1/apps/expenses/releases/ios/\(bad) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(harness.adminKey)\r\n"
                        + "If-Match: \"1\"\r\nContent-Type: application/json\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
                try await Waits.until("the connection closed", timeout: .seconds(10)) { connection.isClosed }
                #expect(connection.status == 400, "\(bad): \(connection.answer.prefix(200))")
                #expect(connection.answer.contains(#""field":"version""#), "\(bad)")
            }
            // The app of a path is text like any parameter: bytes that are not UTF-8 or a control
            // character are named (400); text that is no app's id is no app (404). Check, catalog, reports.
            for (target, key) in [
                ("GET /v1/apps/%APP%/check?platform=ios&version=1.0", nil), ("GET /v1/apps/%APP%", harness.readKey),
                ("GET /v1/apps/%APP%/reports/adoption?platform=ios", harness.readKey),
            ] as [(String, String?)] {
                for (app, status) in [("%FF", 400), ("ex%00penses", 400), ("%E2%82", 400), ("Expenses!", 404), ("none", 404)] {
                    let connection = try await RawConnection.open(port: server.port)
                    let auth = key.map { "Authorization: Bearer \($0)\r\n" } ?? ""
                    await connection.send(
                        target.replacingOccurrences(of: "%APP%", with: app) + " HTTP/1.1\r\nHost: x\r\n\(auth)Connection: close\r\n\r\n")
                    try await Waits.until("the connection closed", timeout: .seconds(10)) { connection.isClosed }
                    #expect(connection.status == status, "\(target) with \(app): \(connection.answer.prefix(200))")
                    if status == 400 { #expect(connection.answer.contains(#""field":"app""#), "\(target) with \(app)") }
                }
            }
            // A header the server reads: an ETag it cannot have is named.
            // 19 digits: beyond the spec's pattern (at most 18), though it would fit an Int.
            for tag in ["\"7187100878738540342055441\"", "\"1000000000000000000\"", "\"01\"", "\"1", "*", "\"1\", \"2\""] {
                let reply = try await server.send(
                    .PUT, "/v1/apps/expenses/policies/ios", key: harness.adminKey, json: .object(["enabled": true]),
                    headers: [("If-Match", tag)])
                #expect(try reply.status == 400 && reply.value()["field"] == .string("If-Match"), "\(tag): \(reply.status)")
            }
        }
    }

    /// A head the HTTP decoder refuses is answered like every other refusal: `400` with a problem body
    /// (not an empty answer or a bare close), then the connection closes; the server keeps answering.
    @Test(arguments: [
        "GET /health/live HTTP/1.1\r\nHost: x\r\nX-Bad: a\u{0}b\r\n\r\n",
        "GET /health/live HTTP/1.1\r\nHost: x\r\nNoColonHere\r\n\r\n",
        "GET /health/live HTTP/1.1\r\nHost: x\r\nBad Name: v\r\n\r\n",
        "GET /health/live HTTP/1.1\r\nHost: x\r\nX-Bad: a\u{1}b\r\n\r\n",
        "GET /health/live HTTP/9.9\r\nHost: x\r\n\r\n",
        "\u{0}\u{1}\u{2} not HTTP\r\n\r\n",
    ])
    func aMalformedHeadIsA400ProblemAndTheConnectionCloses(_ head: String) async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let connection = try await RawConnection.open(port: server.port)
            await connection.send(head)
            try await Waits.until("the connection closed", timeout: .seconds(5)) { connection.isClosed }
            let answer = connection.answer
            #expect(connection.status == 400, "\(head.debugDescription): \(answer.prefix(300).debugDescription)")
            #expect(answer.lowercased().contains("content-type: application/problem+json"), "\(answer.prefix(300))")
            let body = try #require(answer.range(of: "\r\n\r\n").map { answer[$0.upperBound...] })
            let problem = try JSONValue.parse(Data(body.utf8))
            #expect(problem["type"] == "urn:upshift:problem:bad-request")
            #expect(problem["status"] == 400)
            await connection.close()
            #expect(try await server.request(.GET, "/health/live").status == 200)
        }
    }

    @Test func requestsForMethodsAPathDoesNotAnswerAre405WithAllow() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            for (method, path, allow) in [
                (HTTPMethod.TRACE, "/v1/events", "POST"), (.DELETE, "/v1/apps/expenses", "GET, PATCH"),
                (.PUT, "/v1/apps/expenses/check", "GET, POST"), (.DELETE, "/v1/apps/expenses/releases/ios/1.0", "GET, PATCH"),
                (.POST, "/health/live", "GET"),
            ] {
                let reply = try await server.request(method, path)
                #expect(reply.status == 405, "\(method) \(path)")
                #expect(reply.headers["Allow"].first == allow, "\(method) \(path)")
            }
        }
    }

    @Test func apiAnswersAreNotSniffedAndAuthenticatedOnesNotStored() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let check = try await server.request(.GET, "/v1/apps/expenses/check?platform=ios&version=1.0")
            #expect(check.headers["X-Content-Type-Options"].first == "nosniff")
            #expect(check.headers["Cache-Control"].first?.hasPrefix("private, max-age=") == true)
            for path in ["/v1/apps/expenses", "/v1/apps/expenses/policies/ios", "/v1/apps/expenses/history",
                         "/v1/apps/expenses/reports/adoption?platform=ios", "/v1/apps/nope"] {
                let reply = try await server.send(.GET, path, key: harness.adminKey)
                #expect(reply.headers["X-Content-Type-Options"].first == "nosniff", "\(path)")
                #expect(reply.headers["Cache-Control"].first == "no-store", "\(path) \(reply.status)")
            }
            let events = try await server.postEvents([clientEvent(occurredAt: harness.clock.now())], key: harness.ingestKey)
            #expect(events.headers["Cache-Control"].first == "no-store")
            #expect(events.headers["X-Content-Type-Options"].first == "nosniff")
        }
    }

    /// A body as written, with a bearer token.
    static func raw(
        _ server: Server, _ method: HTTPMethod, _ path: String, _ body: String, key: String? = nil,
        headers: [(String, String)] = []
    ) async throws -> Server.Reply {
        var all = [("Content-Type", "application/json")] + headers
        if let key { all.append(("Authorization", "Bearer \(key)")) }
        return try await server.request(method, path, headers: all, body: Data(body.utf8))
    }
}
