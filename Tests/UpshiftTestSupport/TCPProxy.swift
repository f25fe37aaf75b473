import NIOCore
import NIOPosix
import Synchronization

/// A TCP proxy on loopback that a test can cut and restore, to make PostgreSQL unreachable for one
/// server without stopping the cluster that other suites share.
public final class TCPProxy: Sendable {
    public let port: Int
    private let serverChannel: any Channel
    private let state: State

    private final class State: Sendable {
        let value = Mutex<(open: Bool, channels: [any Channel])>((true, []))
        /// Connections are held and nothing is forwarded (``TCPProxy/stall()``).
        let stalled = Mutex(false)
        /// How long a new connection waits before it is forwarded (``TCPProxy/delay(_:)``).
        let delay = Mutex(Duration.zero)
        /// Connections forwarded to the target so far.
        let forwarded = Mutex(0)
        func withLock<T>(_ body: (inout (open: Bool, channels: [any Channel])) -> T) -> T {
            value.withLock { body(&$0) }
        }
    }

    private init(serverChannel: any Channel, state: State) {
        self.serverChannel = serverChannel
        self.port = serverChannel.localAddress?.port ?? 0
        self.state = state
    }

    /// Listens on a free loopback port and forwards every connection to `targetHost:targetPort`.
    public static func start(targetHost: String, targetPort: Int) async throws -> TCPProxy {
        let group = MultiThreadedEventLoopGroup.singleton
        let state = State()
        let bootstrap = ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelInitializer { inbound in
                let isOpen = state.withLock { $0.open }
                guard isOpen else { return inbound.close() }
                if state.stalled.withLock({ $0 }) {
                    // Accepted, and never answered.
                    state.withLock { $0.channels.append(inbound) }
                    return inbound.eventLoop.makeSucceededVoidFuture()
                }
                let (seconds, attoseconds) = state.delay.withLock { $0 }.components
                let wait = TimeAmount.nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
                return inbound.eventLoop.scheduleTask(in: wait) {}.futureResult
                    .flatMap { ClientBootstrap(group: inbound.eventLoop).connect(host: targetHost, port: targetPort) }
                    .flatMap { outbound in
                        state.withLock { $0.channels.append(contentsOf: [inbound, outbound]) }
                        state.forwarded.withLock { $0 += 1 }
                        return inbound.pipeline.addHandler(Glue(peer: outbound, state: state)).flatMap {
                            outbound.pipeline.addHandler(Glue(peer: inbound, state: state))
                        }
                    }
                    .flatMapError { _ in inbound.close() }
            }
        let channel = try await bootstrap.bind(host: "127.0.0.1", port: 0).get()
        return TCPProxy(serverChannel: channel, state: state)
    }

    /// Closes every proxied connection and refuses new ones until ``restore()``.
    public func cut() async {
        let channels = state.withLock { state in
            state.open = false
            defer { state.channels.removeAll() }
            return state.channels
        }
        for channel in channels { try? await channel.close() }
    }

    /// Accepts and forwards connections again.
    public func restore() {
        state.withLock { $0.open = true }
        state.stalled.withLock { $0 = false }
    }

    /// A database that stops answering without closing anything (a network partition): connections stay
    /// open and nothing more is forwarded either way; new ones are accepted and never answered. Every
    /// statement then waits for its own timeout.
    public func stall() {
        state.stalled.withLock { $0 = true }
    }

    /// A database slow to accept (a long network path, a busy server): each new connection is forwarded,
    /// and answered, only `duration` after it arrives.
    public func delay(_ duration: Duration) {
        state.delay.withLock { $0 = duration }
    }

    /// How many connections reached the target so far.
    public var forwarded: Int { state.forwarded.withLock { $0 } }

    public func stop() async {
        await cut()
        try? await serverChannel.close()
    }

    /// Forwards bytes to the peer channel and closes it when this side closes.
    private final class Glue: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let peer: any Channel
        let state: State

        init(peer: any Channel, state: State) {
            self.peer = peer
            self.state = state
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            guard !state.stalled.withLock({ $0 }) else { return }
            peer.writeAndFlush(unwrapInboundIn(data), promise: nil)
        }

        func channelInactive(context: ChannelHandlerContext) {
            peer.close(promise: nil)
            context.fireChannelInactive()
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
