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

    /// `file` when given, else `docs/openapi.yaml` as this binary was built with it.
    static func load(_ file: URL?, logger: Logger) -> OpenAPIDocument? {
        guard let file else {
            return embeddedFiles.first.flatMap { Data(base64Encoded: $0.base64) }.map { OpenAPIDocument(bytes: ByteBuffer(bytes: $0)) }
        }
        guard let data = FileManager.default.contents(atPath: file.path) else {
            logger.warning("no OpenAPI document to serve at /openapi.yaml", metadata: ["file": "\(file.path)"])
            return nil
        }
        return OpenAPIDocument(bytes: ByteBuffer(bytes: data))
    }
}
