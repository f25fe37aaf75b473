import Foundation
import Logging
import NIOCore

/// `docs/openapi.yaml`, read once at start and served at `GET /openapi.yaml`.
struct OpenAPIDocument: Sendable {
    let bytes: ByteBuffer

    /// `docs/openapi.yaml` of the checkout (or image) whose `sql/` folder is `migrations`.
    static func beside(_ migrations: URL) -> URL {
        migrations.deletingLastPathComponent().appendingPathComponent("docs/openapi.yaml")
    }

    /// `file` when given, else `docs/openapi.yaml` as this binary was built with it. A file that cannot
    /// be read stops the server, naming `UPSHIFT_OPENAPI_FILE`.
    static func load(_ file: URL?) throws -> OpenAPIDocument? {
        guard let file else {
            return embeddedFiles.first.flatMap { Data(base64Encoded: $0.base64) }.map { OpenAPIDocument(bytes: ByteBuffer(bytes: $0)) }
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw ConfigurationError.invalid("UPSHIFT_OPENAPI_FILE", file.path, expected: "a readable file")
        }
        return OpenAPIDocument(bytes: ByteBuffer(bytes: data))
    }
}
