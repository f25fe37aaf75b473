import NIOCore
import NIOPosix
import Synchronization

/// A TCP connection that sends whatever bytes a test gives it, when it gives them (a client that
/// trickles its request, or sends nothing at all), and keeps what the server answers.
public final class RawConnection: Sendable {
    private let channel: any Channel
    private let received = Mutex<[UInt8]>([])

    private init(channel: any Channel) {
        self.channel = channel
    }

    /// - Parameter reading: false for a client that reads nothing of the answer (a small receive buffer,
    ///   and no reads) until ``startReading()``.
    public static func open(port: Int, host: String = "127.0.0.1", reading: Bool = true) async throws -> RawConnection {
        let box = Mutex<RawConnection?>(nil)
        var bootstrap = ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
        if !reading {
            bootstrap = bootstrap.channelOption(.autoRead, value: false).channelOption(.socketOption(.so_rcvbuf), value: 4_096)
        }
        let channel = try await bootstrap
            .channelInitializer { channel in
                channel.pipeline.addHandler(Collector { bytes in box.withLock { $0?.append(bytes) } })
            }
            .connect(host: host, port: port).get()
        let connection = RawConnection(channel: channel)
        box.withLock { $0 = connection }
        return connection
    }

    private func append(_ bytes: [UInt8]) {
        received.withLock { $0.append(contentsOf: bytes) }
    }

    /// Sends `text` as it is; false when the connection is closed.
    @discardableResult
    public func send(_ text: String) async -> Bool {
        await send(Array(text.utf8))
    }

    @discardableResult
    public func send(_ bytes: [UInt8]) async -> Bool {
        guard channel.isActive else { return false }
        do {
            try await channel.writeAndFlush(ByteBuffer(bytes: bytes))
            return true
        } catch {
            return false
        }
    }

    /// Sends `text` without waiting for it to be written (many slow clients at once).
    public func push(_ text: String) {
        guard channel.isActive else { return }
        channel.writeAndFlush(ByteBuffer(string: text), promise: nil)
    }

    /// Reads from now on (a client opened with `reading: false`), and so learns whether the server closed.
    public func startReading() async {
        try? await channel.setOption(.autoRead, value: true).get()
        channel.read()
    }

    /// Whether the server closed the connection (or it failed).
    public var isClosed: Bool { !channel.isActive }

    /// What the server sent so far, as text.
    public var answer: String { String(decoding: received.withLock { $0 }, as: UTF8.self) }

    /// The status code of the first answer, when one arrived.
    public var status: Int? {
        let text = answer
        guard text.hasPrefix("HTTP/1.1 "), text.utf8.count >= 12 else { return nil }
        return Int(text.dropFirst(9).prefix(3))
    }

    public func close() async {
        try? await channel.close()
    }

    private final class Collector: ChannelInboundHandler, Sendable {
        typealias InboundIn = ByteBuffer
        let sink: @Sendable ([UInt8]) -> Void

        init(_ sink: @escaping @Sendable ([UInt8]) -> Void) {
            self.sink = sink
        }

        func channelRead(context: ChannelHandlerContext, data: NIOAny) {
            sink(Array(unwrapInboundIn(data).readableBytesView))
        }

        func errorCaught(context: ChannelHandlerContext, error: any Error) {
            context.close(promise: nil)
        }
    }
}
