import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage plus the peer address, which the
/// check's rate limiter needs (DESIGN.md section 7).
public struct UpshiftRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer (a proxy's address when behind one).
    public let peerAddress: String?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peerAddress = source.channel.remoteAddress?.ipAddress
    }

    /// Event batches are limited by the ingestion controller itself (1 MiB after decompression).
    public var maxUploadSize: Int { 2 * 1024 * 1024 }
}

extension Request {
    /// An integer query parameter within `range`, `value` when absent; otherwise a `400` naming it.
    func integerParameter(_ name: String, default value: Int, range: ClosedRange<Int>) throws -> Int {
        guard let text = uri.queryParameters[Substring(name)] else { return value }
        guard let number = Int(String(text)), range.contains(number) else {
            throw ProblemDetails.badRequest("\(name) must be an integer from \(range.lowerBound) to \(range.upperBound)", field: name)
        }
        return number
    }
}
