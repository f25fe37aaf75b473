import Foundation
import Hummingbird
import NIOCore

/// JSON responses of the API (not the check, which sets its own caching): never stored by a cache.
enum JSONResponse {
    static func make(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:],
        encoder: JSONEncoder = JSONEncoder()
    ) throws -> Response {
        let data = try encoder.encode(value)
        var headers = headers
        headers[.contentType] = "application/json"
        headers[.cacheControl] = "no-store"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
