import Hummingbird
import NIOCore

/// The request context of every route: Hummingbird's core storage, the peer address (the rate
/// limiters need it) and, once authentication middleware ran, the caller.
public struct UpshiftRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// The TCP peer (a proxy's address when behind one).
    public let peer: SocketAddress?
    /// The caller, set by ``BearerAuthentication`` (API) or ``SessionMiddleware`` (dashboard).
    var identity: Identity?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
        peer = source.channel.remoteAddress
    }

    /// Every route reads its body with a limit of its own (at most 1 MiB, for events); this is the
    /// backstop for a route that collects without one.
    public var maxUploadSize: Int { 1 << 20 }

    /// The caller, or ``AuthenticationRequired`` for a route whose group has no authentication.
    func requireIdentity() throws -> Identity {
        guard let identity else { throw AuthenticationRequired("send Authorization: Bearer <key>") }
        return identity
    }
}
