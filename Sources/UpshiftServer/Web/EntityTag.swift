import Foundation
import HTTPTypes
import Hummingbird
import NIOCore

/// Entity tags of the public answers (the check, the update feeds): strong, from the body's bytes.
enum EntityTag {
    /// `304` with the answer's headers but its type when the request's `If-None-Match` names `etag`, else
    /// `200` with `headers` and `body`.
    static func response(to request: Request, etag: String, headers: HTTPFields, body: ByteBuffer) -> Response {
        guard matches(request.headers[.ifNoneMatch], etag: etag) else {
            return Response(status: .ok, headers: headers, body: .init(byteBuffer: body))
        }
        var headers = headers
        headers[.contentType] = nil
        return Response(status: .notModified, headers: headers)
    }

    /// Whether an `If-None-Match` names `etag` (strongly or weakly) or is `*`.
    private static func matches(_ ifNoneMatch: String?, etag: String) -> Bool {
        guard let ifNoneMatch else { return false }
        return ifNoneMatch.split(separator: ",").contains {
            let tag = $0.trimmingCharacters(in: .whitespaces)
            return tag == etag || tag == "W/" + etag || tag == "*"
        }
    }

    /// FNV-1a, 64 bits: a cheap, stable ETag of the response body.
    static func fnv1a(_ data: Data) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        data.withUnsafeBytes { bytes in
            for byte in bytes {
                hash ^= UInt64(byte)
                hash &*= 0x100_0000_01b3
            }
        }
        return String(hash, radix: 16)
    }
}
