import Foundation
import Hummingbird
import NIOCore

/// JSON responses with the content type set.
enum JSONResponse {
    static func make(
        _ value: some Encodable, status: HTTPResponse.Status = .ok, headers: HTTPFields = [:],
        encoder: JSONEncoder = JSONEncoder()
    ) throws -> Response {
        let data = try encoder.encode(value)
        var headers = headers
        headers[.contentType] = "application/json"
        return Response(status: status, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}
