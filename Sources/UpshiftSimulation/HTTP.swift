import Foundation
import UpshiftCore

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The few HTTP calls the simulation makes besides the SDK's: admin writes, reports, readiness.
struct HTTP: Sendable {
    let baseURL: URL

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func request(_ method: String, _ path: String, key: String?, body: JSONValue? = nil, ifMatch: Int? = nil)
        async throws -> (Int, Data)
    {
        var request = URLRequest(url: URL(string: path, relativeTo: baseURL)!.absoluteURL)
        request.httpMethod = method
        if let key { request.setValue("Bearer \(key)", forHTTPHeaderField: "Authorization") }
        if let ifMatch { request.setValue("\"\(ifMatch)\"", forHTTPHeaderField: "If-Match") }
        if let body {
            request.httpBody = try JSONEncoder().encode(body)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, data)
    }

    enum Method: String { case POST, PUT }

    func admin(_ method: Method, _ path: String, key: String, body: JSONValue, ifMatch: Int? = nil) async throws {
        let (status, data) = try await request(method.rawValue, path, key: key, body: body, ifMatch: ifMatch)
        guard (200..<300).contains(status) else {
            throw Failure(description: "\(method.rawValue) \(path): HTTP \(status) \(String(decoding: data, as: UTF8.self))")
        }
    }

    func post(_ path: String, key: String, body: JSONValue) async throws -> JSONValue {
        let (status, data) = try await request("POST", path, key: key, body: body)
        guard status == 200 else { throw Failure(description: "POST \(path): HTTP \(status) \(String(decoding: data, as: UTF8.self))") }
        return try JSONValue.parse(data)
    }

    func get(_ path: String, key: String) async throws -> JSONValue {
        let (status, data) = try await request("GET", path, key: key)
        guard status == 200 else { throw Failure(description: "GET \(path): HTTP \(status) \(String(decoding: data, as: UTF8.self))") }
        return try JSONValue.parse(data)
    }

    /// A metric of `/metrics` without labels (nil when absent).
    func metric(_ name: String, token: String?) async throws -> Double? {
        let (status, data) = try await request("GET", "/metrics", key: token)
        guard status == 200 else { throw Failure(description: "GET /metrics: HTTP \(status)") }
        let line = String(decoding: data, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Double($0.dropFirst(name.count + 1)) }
    }

    func waitUntilReady() async throws {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline {
            if let (status, _) = try? await request("GET", "/health/ready", key: nil), status == 200 { return }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw Failure(description: "the in-process server did not become ready within 60 s")
    }
}
