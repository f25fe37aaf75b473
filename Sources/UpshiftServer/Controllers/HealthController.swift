import Foundation
import Hummingbird
import NIOCore
import UpshiftStore

/// `/health/live`, `/health/ready`, `/health/db`, `/metrics` and `/openapi.yaml`. With an operator
/// token (`UPSHIFT_METRICS_TOKEN`), `/health/db` and `/metrics` answer its bearer only.
struct HealthController: Sendable {
    let readiness: Readiness
    let database: DatabaseProbe
    /// Writes the metrics in Prometheus' text format.
    let exposition: @Sendable (inout [UInt8]) -> Void
    let openAPI: OpenAPIDocument?
    let operatorToken: String?

    var routes: RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.get("health/live", use: live)
            .get("health/ready", use: ready)
            .get("health/db", use: databaseHealth)
            .get("openapi.yaml", use: document)
            .get("metrics", use: metrics)
        return routes
    }

    @Sendable func live(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        try JSONResponse.make(["status": "live"])
    }

    @Sendable func ready(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        let missing = readiness.missing
        guard missing.isEmpty else {
            return try JSONResponse.make(
                ["status": "starting", "waitingFor": missing.map(\.rawValue).sorted().joined(separator: ",")],
                status: .serviceUnavailable)
        }
        return try JSONResponse.make(["status": "ready"])
    }

    /// `401` unless the request carries the operator token, when there is one.
    private func requireOperator(_ request: Request) throws {
        guard let operatorToken else { return }
        guard let token = request.bearerToken, constantTimeEqual(token, operatorToken) else {
            throw AuthenticationRequired("send Authorization: Bearer <the operator token of UPSHIFT_METRICS_TOKEN>")
        }
    }

    @Sendable func databaseHealth(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        try requireOperator(request)
        guard case .reachable(let elapsed) = await database.current() else {
            return try JSONResponse.make(["status": "unreachable"], status: .serviceUnavailable)
        }
        let millis = Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000
        return try JSONResponse.make(DatabaseHealth(status: "ok", latencyMs: (millis * 10).rounded() / 10))
    }

    @Sendable func document(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        guard let openAPI else { throw ProblemDetails.notFound("docs/openapi.yaml was not installed with this server") }
        return Response(
            status: .ok, headers: [.contentType: "application/yaml; charset=utf-8", .cacheControl: "no-cache"],
            body: .init(byteBuffer: openAPI.bytes))
    }

    @Sendable func metrics(_ request: Request, context: UpshiftRequestContext) throws -> Response {
        try requireOperator(request)
        var buffer: [UInt8] = []
        exposition(&buffer)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
    }
}

private struct DatabaseHealth: Encodable {
    var status: String
    var latencyMs: Double
}
