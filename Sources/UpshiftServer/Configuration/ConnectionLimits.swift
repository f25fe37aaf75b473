/// How long a connection may take over each part of a request, and how large a request head may be.
public struct ConnectionLimits: Sendable {
    /// The request head complete within this time of its first byte (of the previous response, when it
    /// arrived while that was being answered); else `408` and the connection closes.
    public var headTimeout: Duration = .seconds(10)
    /// The body complete within this time of the head; else `408`, even while bytes still arrive.
    public var bodyTimeout: Duration = .seconds(30)
    /// A connection with no request under way is closed after this time.
    public var idleTimeout: Duration = .seconds(60)
    /// An answer must be written, and taken by the client, within this time of its head (of its last
    /// part, for an answer written in parts); else the connection closes. A client that asks for a large
    /// answer and never reads it holds its connection no longer than this.
    public var writeTimeout: Duration = .seconds(30)
    /// Connections open at once; more wait in the accept backlog.
    public var maximumConnections = 4_096
    /// The request target and header fields together (names and values); more is `431`.
    public var maximumHeadBytes = 16 * 1024
    /// Request bodies held in memory at once, server-wide, as their requests reserve them (``BodyBudget``);
    /// a request that does not fit is `503` with `Retry-After`.
    public var bodyBudgetBytes = 32 << 20
    /// On SIGTERM, the whole shutdown ends within this time: requests still running are cut off in time
    /// for the ingestion writer to write what is pending in the rest (``ShutdownDeadline``).
    public var shutdownTimeout: Duration = .seconds(25)

    public init() {}
}
