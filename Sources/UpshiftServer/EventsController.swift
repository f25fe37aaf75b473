import CompressNIO
import Foundation
import Hummingbird
import NIOCore
import Prometheus
import UpshiftCore
import UpshiftStore

/// `POST /v1/events` (DESIGN.md section 5).
struct EventsController: Sendable {
    /// At most this many events per request.
    static let maximumEvents = 500
    /// At most this many bytes per request after decompression.
    static let maximumBytes = 1 << 20

    let writer: IngestionWriter
    let authenticator: KeyAuthenticator
    let clock: any WallClock
    let validator = EventValidator()
    let counters: [IngestResponse.Status: Prometheus.Counter]

    init(writer: IngestionWriter, authenticator: KeyAuthenticator, clock: any WallClock, metrics: PrometheusCollectorRegistry) {
        self.writer = writer
        self.authenticator = authenticator
        self.clock = clock
        var counters: [IngestResponse.Status: Prometheus.Counter] = [:]
        for status in [IngestResponse.Status.accepted, .duplicate, .rejected] {
            counters[status] = metrics.counter(
                "events", labels: [("status", status.rawValue)], help: "Posted events by result")
        }
        self.counters = counters
    }

    func addRoutes(to router: Router<UpshiftRequestContext>) {
        router.post("/v1/events") { request, context in
            try await post(request, context: context)
        }
    }

    func post(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let key = try await authenticator.authenticate(request)
        guard key.scope == .ingest, let appId = key.appId else {
            throw ProblemDetails.forbidden("only an ingest key may post events")
        }
        let body = try await readBody(request)
        let batch: IncomingBatch
        do {
            batch = try JSONDecoder().decode(IncomingBatch.self, from: Data(body.readableBytesView))
        } catch {
            throw ProblemDetails.badRequest("the body must be a JSON object {\"events\": [...]}", field: "events")
        }
        guard batch.events.count <= Self.maximumEvents else {
            throw ProblemDetails.tooLarge("at most \(Self.maximumEvents) events per request")
        }

        let now = clock.now()
        var results: [IngestResponse.Result] = []
        results.reserveCapacity(batch.events.count)
        var valid: [Event] = []
        var tooOld: [(index: Int, event: Event)] = []
        var seen = Set<UUID>()
        for (index, incoming) in batch.events.enumerated() {
            let postedId = incoming[.id]
            switch validator.validate(incoming, appId: appId, now: now) {
            case .success(let event):
                if seen.insert(event.id).inserted {
                    valid.append(event)
                    results.append(.init(index: index, id: postedId, status: .accepted))
                } else {
                    results.append(.init(index: index, id: postedId, status: .duplicate))
                }
            case .failure(let rejection):
                if let event = rejection.tooOld { tooOld.append((index, event)) }
                results.append(.init(index: index, id: postedId, status: .rejected, rejection: rejection))
            }
        }

        let inserted: Set<UUID>
        var retried = Set<UUID>()  // too old, but stored earlier
        do {
            if tooOld.isEmpty {
                inserted = try await writer.append(valid)
            } else {
                // Looked up beside the append, so the lookup adds no round trip.
                async let found = writer.alreadyStored(tooOld.map(\.event))
                inserted = try await writer.append(valid)
                retried = try await found
            }
        } catch let error as IngestionError {
            switch error {
            case .databaseUnavailable: throw ProblemDetails.unavailable("the event log is unreachable; retry later", retryAfter: 2)
            case .overloaded: throw ProblemDetails.unavailable("too many events are waiting; retry later", retryAfter: 1)
            case .shuttingDown: throw ProblemDetails.unavailable("the server is shutting down; retry", retryAfter: 1)
            }
        }
        // A retry of an event stored while it was recent (its first answer lost) is a duplicate.
        for (index, event) in tooOld where retried.contains(event.id) {
            results[index] = .init(index: index, id: results[index].id, status: .duplicate)
        }
        if inserted.count < valid.count {
            // Events that were not new are retries of ones already stored.
            let stored = Set(valid.map(\.id)).subtracting(inserted)
            for index in results.indices where results[index].status == .accepted {
                if let text = results[index].id, let id = UUIDText.parse(text), stored.contains(id) {
                    results[index].status = .duplicate
                }
            }
        }
        let response = IngestResponse(results: results)
        counters[.accepted]?.increment(by: Int64(response.accepted))
        counters[.duplicate]?.increment(by: Int64(response.duplicates))
        counters[.rejected]?.increment(by: Int64(response.rejected))
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(string: response.json)))
    }

    /// The body, decompressed when `Content-Encoding: gzip`, refused (413) past 1 MiB.
    private func readBody(_ request: Request) async throws -> ByteBuffer {
        let encoding = request.headers[.contentEncoding]?.lowercased() ?? "identity"
        var body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBytes)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("at most 1 MiB per request")
        }
        switch encoding {
        case "identity":
            return body
        case "gzip", "x-gzip":
            do {
                return try body.decompress(with: .gzip(), maxSize: Self.maximumBytes)
            } catch let error as CompressNIOError where error == .bufferOverflow {
                throw ProblemDetails.tooLarge("at most 1 MiB per request after decompression")
            } catch {
                throw ProblemDetails.badRequest("the body is not valid gzip")
            }
        default:
            throw ProblemDetails(
                .unsupportedMediaType, type: "urn:upshift:problem:unsupported-encoding",
                title: "Unsupported content encoding", detail: "send identity or gzip")
        }
    }
}
