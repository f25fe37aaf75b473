import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage plus the peer address, which the
/// rate limiters need (DESIGN.md section 7).
public struct UpshiftRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer (a proxy's address when behind one).
    public let peer: SocketAddress?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = source.channel.remoteAddress
    }

    /// Every route reads its body with a limit of its own (at most 1 MiB, for events); this is the
    /// backstop for a route that collects without one.
    public var maxUploadSize: Int { 1 << 20 }
}
