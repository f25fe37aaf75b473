import CompressNIO
import Foundation
import HTTPTypes
import Hummingbird
import NIOCore
import Metrics
import UpshiftCore
import UpshiftStore

/// `POST /v1/events` (docs/ARCHITECTURE.md, "The ingestion path").
struct EventsController: Sendable {
    /// At most this many events per request.
    static let maximumEvents = 500
    /// At most this many bytes per request, as received and after decompression.
    static let maximumBytes = 1 << 20
    /// A posted id is repeated in its result only when it is this short (a UUID has 36 characters).
    static let maximumEchoedId = 64

    let writer: IngestionWriter
    let clock: any WallClock
    let perClient: RateLimiter
    let perKey: RateLimiter
    let trustedProxies: Set<String>
    let validator = EventValidator()
    let counters: [IngestResponse.Status: Counter]
    /// Events per accepted request body.
    let batchEvents: Recorder

    init(
        writer: IngestionWriter, clock: any WallClock, settings: IngestionSettings, trustedProxies: Set<String>,
        metrics: any MetricsFactory
    ) {
        self.writer = writer
        self.clock = clock
        self.perClient = RateLimiter(settings.ratePerClient, name: "events_client", metrics: metrics)
        self.perKey = RateLimiter(settings.ratePerKey, name: "events_key", metrics: metrics, capacity: 10_000)
        self.trustedProxies = trustedProxies
        var counters: [IngestResponse.Status: Counter] = [:]
        for status in [IngestResponse.Status.accepted, .duplicate, .rejected] {
            counters[status] = Counter(label: "upshift_events_total", dimensions: [("status", status.rawValue)], factory: metrics)
        }
        self.counters = counters
        batchEvents = Recorder(label: "upshift_ingest_batch_events", factory: metrics)
    }

    /// `POST /v1/events`. Before the body is read, a token from each bucket pays for reading it: the
    /// client address's (before the key is even looked at), then the key's.
    func routes(authentication: BearerAuthentication) -> RouteCollection<UpshiftRequestContext> {
        let routes = RouteCollection(context: UpshiftRequestContext.self)
        routes.add(middleware: ClientRateLimit(limiter: perClient, trustedProxies: trustedProxies, detail: limitDetail(perClient)))
            .add(middleware: authentication)
            .add(middleware: RequireAccess(.ingest))
            .post(use: post)
        return routes
    }

    @Sendable func post(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let key = try context.requireIdentity().key
        guard let appId = key.appId else { throw AccessDenied("only an ingest key may post events") }
        let client = ClientAddress.of(request, context, trustedProxies: trustedProxies)
        let keyId = key.id.uuidString
        do {
            try limit(perKey, keyId, cost: 1)
        } catch {
            // A request the key's bucket refuses gives the client's token back.
            perClient.refund(client, cost: 1)
            throw error
        }
        try request.requireContentType("application/json")
        let body = try await readBody(request)
        let batch = try IncomingBatch.parse(Array(body.readableBytesView), maximumEvents: Self.maximumEvents)
        batchEvents.record(batch.events.count)
        // The rest of the batch, a token per event past the first, from both buckets or from neither.
        let rest = Double(max(0, batch.events.count - 1))
        if rest > 0 {
            try limit(perKey, keyId, cost: rest)
            do {
                try limit(perClient, client, cost: rest)
            } catch {
                perKey.refund(keyId, cost: rest)
                throw error
            }
        }

        let now = clock.now()
        var results: [IngestResponse.Result] = []
        results.reserveCapacity(batch.events.count)
        var valid: [Event] = []
        var resultIndex: [Int] = []  // of each event of `valid`
        var firstIndex: [UUID: Int] = [:]  // of each id in `valid`
        var tooOld: [(index: Int, event: Event)] = []  // valid but for its age: stored earlier?
        for (index, incoming) in batch.events.enumerated() {
            let postedId = incoming[.id].flatMap { $0.utf8.count <= Self.maximumEchoedId ? $0 : nil }
            switch validator.validate(incoming, appId: appId, now: now) {
            case .success(let event):
                if let first = firstIndex[event.id] {
                    // The same id twice in one request: the first copy decides.
                    results.append(Self.settled(event, stored: valid[first], index: index, id: postedId))
                } else {
                    firstIndex[event.id] = valid.count
                    valid.append(event)
                    resultIndex.append(index)
                    results.append(.init(index: index, id: postedId, status: .accepted))
                }
            case .failure(let rejection):
                if let event = rejection.tooOld { tooOld.append((index, event)) }
                results.append(.init(index: index, id: postedId, status: .rejected, rejection: rejection))
            }
        }

        let new = try await writer.append(valid)
        var unsettled: [(index: Int, event: Event)] = []  // not new: a resend, or another event under its id
        for (position, event) in valid.enumerated() where !new[position] {
            unsettled.append((resultIndex[position], event))
        }
        // Events not stored now, and events too old to store: compared with what the log holds.
        let stored = try await writer.stored(matching: (unsettled + tooOld).map(\.event))
        let storedByKey = Dictionary(stored.map { ($0.key, $0) }, uniquingKeysWith: { first, _ in first })
        for (index, event) in unsettled {
            guard let original = storedByKey[event.key] else {
                // Claimed, yet not in the log under this app: the log's key (id, occurredAt) is taken by
                // another app's event, or the install was erased meanwhile. Not stored, and said so.
                results[index] = .init(
                    index: index, id: results[index].id, status: .rejected,
                    rejection: EventRejection(
                        code: "id_conflict", field: "id", message: "this id cannot be stored; send the event with a new id"))
                continue
            }
            results[index] = Self.settled(event, stored: original, index: index, id: results[index].id)
        }
        for (index, event) in tooOld {
            // Stored while it was recent (its first answer lost): a duplicate, or a conflict.
            if let original = storedByKey[event.key] {
                results[index] = Self.settled(event, stored: original, index: index, id: results[index].id)
            }
        }
        for (index, incoming) in batch.events.enumerated() {
            let ignored = incoming.ignored
            if !ignored.isEmpty { results[index].ignored = ignored }
        }
        let response = IngestResponse(results: results)
        counters[.accepted]?.increment(by: Int64(response.accepted))
        counters[.duplicate]?.increment(by: Int64(response.duplicates))
        counters[.rejected]?.increment(by: Int64(response.rejected))
        return Response(
            status: .ok, headers: [.contentType: "application/json", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: response.json)))
    }

    /// A resend (every field the same) is a duplicate; another event under a used id is rejected.
    private static func settled(_ event: Event, stored: Event, index: Int, id: String?) -> IngestResponse.Result {
        guard let field = event.firstDifference(from: stored) else { return .init(index: index, id: id, status: .duplicate) }
        return .init(
            index: index, id: id, status: .rejected,
            rejection: EventRejection(
                code: "id_conflict", field: field,
                message: "another event with this id is stored; its \(field) differs (ids are never reused)"))
    }

    private func limit(_ limiter: RateLimiter, _ client: String, cost: Double) throws {
        try limiter.enforce(client, cost: cost, detail: limitDetail(limiter))
    }

    private func limitDetail(_ limiter: RateLimiter) -> String {
        let kind = limiter === perKey ? "ingest key" : "client address"
        return "at most \(limiter.rate.formatted()) events per second per \(kind) (bursts of \(limiter.burst.formatted()))"
    }

    /// The body, decompressed when `Content-Encoding: gzip`, refused (413) past 1 MiB as received or
    /// after decompression, and (400) unless it is one whole gzip member.
    private func readBody(_ request: Request) async throws -> ByteBuffer {
        let encoding = request.headers[.contentEncoding]?.lowercased() ?? "identity"
        guard ["identity", "gzip", "x-gzip"].contains(encoding) else {
            throw ProblemDetails(.unsupportedEncoding, detail: "send identity or gzip")
        }
        var body: ByteBuffer
        do {
            body = try await request.body.collect(upTo: Self.maximumBytes)
        } catch is NIOTooManyBytesError {
            throw ProblemDetails.tooLarge("at most 1 MiB per request")
        }
        guard encoding != "identity" else { return body }
        let received = body
        let decompressed: ByteBuffer
        do {
            // One byte past the limit tells a body that is too large from one that fits exactly.
            decompressed = try body.decompress(with: .gzip(), maxSize: Self.maximumBytes + 1)
        } catch let error as CompressNIOError where error == .bufferOverflow {
            throw ProblemDetails.tooLarge("at most 1 MiB per request after decompression")
        } catch {
            throw ProblemDetails.badRequest("the body is not valid gzip", field: "body")
        }
        guard decompressed.readableBytes <= Self.maximumBytes else {
            throw ProblemDetails.tooLarge("at most 1 MiB per request after decompression")
        }
        // zlib stops at the end of the first member and takes a stream cut off before its end for one still
        // coming: a body must be one whole member, its trailer (CRC-32 and length) matching what it inflated to.
        guard body.readableBytes == 0, Self.trailerMatches(of: received, decompressed) else {
            throw ProblemDetails.badRequest("the body is not one whole gzip stream", field: "body")
        }
        return decompressed
    }

    /// Whether the last 8 bytes of a gzip body are the CRC-32 and the length of `decompressed`.
    private static func trailerMatches(of body: ByteBuffer, _ decompressed: ByteBuffer) -> Bool {
        let end = body.writerIndex
        guard body.readableBytes >= 18,  // a header of 10 bytes and the trailer
            let crc = body.getInteger(at: end - 8, endianness: .little, as: UInt32.self),
            let length = body.getInteger(at: end - 4, endianness: .little, as: UInt32.self)
        else { return false }
        return length == UInt32(truncatingIfNeeded: decompressed.readableBytes)
            && crc == decompressed.withUnsafeReadableBytes { CRC32.checksum($0) }
    }
}
