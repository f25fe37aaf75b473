import Foundation
import Hummingbird
import Logging
import NIOCore
import Prometheus
import Synchronization
import UpshiftStore

/// Whether the instance should receive traffic (DESIGN.md section 8). Set once the start-up work
/// (migrations, partitions, the catalog snapshot) is done, and never unset by a database outage:
/// checks keep working from memory, so an outage must not take instances out of a load balancer.
final class Readiness: Sendable {
    private let conditions = Mutex<Set<String>>([])
    private let required: Set<String>

    init(required: Set<String>) {
        self.required = required
    }

    func mark(_ condition: String) {
        conditions.withLock { _ = $0.insert(condition) }
    }

    var missing: Set<String> {
        conditions.withLock { required.subtracting($0) }
    }
}

/// `/health/live`, `/health/ready`, `/health/db`, `/metrics` and `/openapi.yaml`.
struct HealthController: Sendable {
    let readiness: Readiness
    let database: Database
    let metrics: PrometheusCollectorRegistry
    let openAPI: OpenAPIDocument?

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.get("/health/live") { _, _ in
            try JSONResponse.make(["status": "live"])
        }
        router.get("/health/ready") { _, _ in
            let missing = readiness.missing
            guard missing.isEmpty else {
                return try JSONResponse.make(
                    ["status": "starting", "waitingFor": missing.sorted().joined(separator: ",")],
                    status: .serviceUnavailable)
            }
            return try JSONResponse.make(["status": "ready"])
        }
        router.get("/health/db") { _, _ in
            let started = ContinuousClock.now
            guard await database.isReachable() else {
                return try JSONResponse.make(["status": "unreachable"], status: .serviceUnavailable)
            }
            let elapsed = ContinuousClock.now - started
            let millis = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
            return try JSONResponse.make(DatabaseHealth(status: "ok", latencyMs: (millis * 10).rounded() / 10))
        }
        router.get("/openapi.yaml") { _, _ in
            guard let openAPI else { throw ProblemDetails.notFound("docs/openapi.yaml was not installed with this server") }
            return Response(
                status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "no-cache"],
                body: .init(byteBuffer: openAPI.bytes))
        }
        router.get("/metrics") { _, _ in
            var buffer: [UInt8] = []
            metrics.emit(into: &buffer)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
        }
    }
}

private struct DatabaseHealth: Encodable {
    var status: String
    var latencyMs: Double
}

/// `docs/openapi.yaml`, read once at start.
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
