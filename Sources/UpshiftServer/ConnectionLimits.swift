/// How long a connection may take over each part of a request, and how large a request head may be.
public struct ConnectionLimits: Sendable {
    /// The request head complete within this time of its first byte (of the previous response, when it
    /// arrived while that was being answered); else `408` and the connection closes.
    public var headTimeout: Duration = .seconds(10)
    /// The body complete within this time of the head; else `408`, even while bytes still arrive.
    public var bodyTimeout: Duration = .seconds(30)
    /// A connection with no request under way is closed after this time.
    public var idleTimeout: Duration = .seconds(60)
    /// Connections open at once; more wait in the accept backlog.
    public var maximumConnections = 4_096
    /// The request target and header fields together (names and values); more is `431`.
    public var maximumHeadBytes = 16 * 1024
    /// On SIGTERM, requests still running this long after the server stopped accepting are cut off.
    public var shutdownTimeout: Duration = .seconds(25)

    public init() {}
}
