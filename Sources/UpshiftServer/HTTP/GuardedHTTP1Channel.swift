import HTTPTypes
import Hummingbird
import HummingbirdCore
import Logging
import NIOCore
import NIOHTTP1
import NIOHTTPTypes
import NIOHTTPTypesHTTP1
import ServiceLifecycle
import UpshiftCore

/// What a request whose body did not arrive in time throws from its body: answered `408`.
struct RequestTimedOut: Error {}

/// Hummingbird's HTTP/1.1 channel with the bounds of ``ConnectionLimits``: a head and a body deadline,
/// an idle timeout, a deadline for writing an answer, a limit on the head's size (`431`), and a last
/// deadline on graceful shutdown after which a connection that still has not finished is closed.
struct GuardedHTTP1Channel: ServerChildChannel, HTTPChannelHandler {
    typealias Value = NIOAsyncChannel<HTTPRequestPart, HTTPResponsePart>

    let responder: HTTPChannelHandler.Responder
    let limits: ConnectionLimits
    let shutdown: ShutdownDeadline

    func setup(channel: any NIOCore.Channel, logger: Logger) -> EventLoopFuture<Value> {
        channel.eventLoop.makeCompletedFuture {
            var decoderLimits = NIOHTTPDecoderLimitConfiguration()
            decoderLimits.maxHeaderFieldSize = limits.maximumHeadBytes
            decoderLimits.maxHeaderListSize = limits.maximumHeadBytes
            let pipeline = channel.pipeline.syncOperations
            try pipeline.addHandler(ArrivalWatcher())
            try pipeline.configureHTTPServerPipeline(
                withPipeliningAssistance: false, withErrorHandling: false, withOutboundHeaderValidation: false,
                withEncoderConfiguration: .init(), withDecoderLimitConfiguration: decoderLimits)
            try pipeline.addHandler(HTTP1ToHTTPServerCodec(secure: false))
            try pipeline.addHandler(RequestDeadlines(limits: limits))
            // Hummingbird's own: closes idle connections on graceful shutdown, busy ones after their answer.
            try pipeline.addHandler(HTTPConnectionStateHandler(idleTimeout: nil, logger: logger))
            return try NIOAsyncChannel(
                wrappingChannelSynchronously: channel, configuration: .init(isOutboundHalfClosureEnabled: true))
        }
    }

    func handle(value: Value, logger: Logger) async {
        let channel = value.channel
        let shutdown = shutdown
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await handleHTTP(asyncChannel: value, logger: logger) }
            group.addTask {
                // When the requests' share of the shutdown is spent, whatever still runs is cut off: the
                // connection closes and its request's task is cancelled, so that shutdown ends within its bound.
                do {
                    try await gracefulShutdown()
                    shutdown.begin()
                    try await Task.sleep(until: shutdown.requestsEnd ?? .now, clock: .continuous)
                } catch {
                    return  // the connection ended first
                }
                channel.close(promise: nil)
            }
            await group.next()
            group.cancelAll()
        }
    }
}

/// Tells the handlers after the HTTP decoder that bytes arrived, before the decoder has a whole head.
private struct BytesArrived {}

private final class ArrivalWatcher: ChannelInboundHandler, RemovableChannelHandler {
    typealias InboundIn = ByteBuffer
    typealias InboundOut = ByteBuffer

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        context.fireUserInboundEventTriggered(BytesArrived())
        context.fireChannelRead(data)
    }
}

/// The deadlines of one connection: idle (no request under way), head (bytes of a request arrived, its
/// head not complete), body (head read, body not complete), and, beside them, the answer's (its head
/// written, its end not yet: a client that does not read holds the rest back). Between a request's end
/// and its answer's head nothing is timed: the application bounds its own work.
private final class RequestDeadlines: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private enum Timer {
        case idle, head, body
    }

    private let limits: ConnectionLimits
    /// The running deadline: which one and when it passes (nil: none runs).
    private var timer: Timer?
    private var deadline = NIODeadline.distantFuture
    /// One wake-up at a time, never further ahead than the shortest timeout, so that a deadline which
    /// starts or moves (three per request) needs no task of its own: the wake-up compares and sleeps on.
    private var wakeUp: Scheduled<Void>?
    private let longestSleep: TimeAmount
    /// A request's head read, its end not yet.
    private var readingRequest = false
    /// Requests read whose answer has not ended.
    private var unanswered = 0
    /// Bytes of a next request arrived while an answer was under way.
    private var bytesWaiting = false
    /// After the body deadline: close once the answer (a 408) is written.
    private var closeAfterAnswer = false
    /// While an answer is being written, or its bytes wait for a client that does not read them: when
    /// its next part must be written, or its buffer drained.
    private var answerDeadline: NIODeadline?
    /// An answer's head is written, its end not yet.
    private var answering = false

    init(limits: ConnectionLimits) {
        self.limits = limits
        self.longestSleep = TimeAmount(
            min(limits.headTimeout, limits.bodyTimeout, limits.idleTimeout, limits.writeTimeout))
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(.idle, context: context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        if timer == nil { start(.idle, context: context) }
        context.fireChannelActive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stop()
    }

    func channelInactive(context: ChannelHandlerContext) {
        stop()
        context.fireChannelInactive()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        guard event is BytesArrived else { return context.fireUserInboundEventTriggered(event) }
        if readingRequest { return }
        if unanswered > 0 {
            bytesWaiting = true
        } else if timer == .idle {
            start(.head, context: context)
        }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head:
            readingRequest = true
            unanswered += 1
            bytesWaiting = false
            start(.body, context: context)
        case .body:
            break
        case .end:
            readingRequest = false
            if unanswered == 0 {
                // Answered before its body ended (a 401, a 404 …): idle from now on.
                start(bytesWaiting ? .head : .idle, context: context)
                bytesWaiting = false
            } else if timer == .body {
                cancel()
            }
        }
        context.fireChannelRead(data)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        // A head the decoder refuses: over the limit (431), or not HTTP (a NUL in a header value, a
        // header line without a colon, a bad request line: 400), answered as a problem like every other
        // refusal, and the connection closes (the decoder cannot go on). While another request is being
        // read or answered (a pipelined head, oversized trailers) only the close: its answer is under way.
        // An error in the middle of a body goes on to the application, which is reading it.
        if let parserError = error as? HTTPParserError, !readingRequest || parserError == .headerOverflow {
            guard unanswered == 0, !readingRequest else {
                context.close(promise: nil)
                return
            }
            let problem =
                parserError == .headerOverflow
                ? ProblemDetails(
                    .requestTooLarge,
                    detail: "the request target and header fields may have \(limits.maximumHeadBytes) bytes together")
                : ProblemDetails.badRequest("the request head is not well-formed HTTP/1.1 (\(parserError))")
            answer(problem, context: context)
            return
        }
        context.fireErrorCaught(error)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        // Each part of an answer that gets past back-pressure is progress: the rest must follow, and
        // what is buffered must drain to the client, within the write timeout.
        answerDeadline = .now() + TimeAmount(limits.writeTimeout)
        if wakeUp == nil { scheduleWakeUp(context: context) }
        guard case .end = unwrapOutboundIn(data) else {
            answering = true
            return context.write(data, promise: promise)
        }
        answering = false
        unanswered = max(0, unanswered - 1)
        if closeAfterAnswer {
            context.writeAndFlush(data, promise: promise)
            context.close(promise: nil)
            return
        }
        if unanswered == 0, !readingRequest {
            start(bytesWaiting ? .head : .idle, context: context)
            bytesWaiting = false
        }
        context.write(data, promise: promise)
        // Written whole and nothing held back: no deadline. Else it runs until the buffer drains.
        if context.channel.isWritable { answerDeadline = nil }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        // An answer's end was written and its bytes have now drained below the buffer's limit.
        if context.channel.isWritable, !answering { answerDeadline = nil }
        context.fireChannelWritabilityChanged()
    }

    private func start(_ kind: Timer, context: ChannelHandlerContext) {
        timer = kind
        let duration =
            switch kind {
            case .idle: limits.idleTimeout
            case .head: limits.headTimeout
            case .body: limits.bodyTimeout
            }
        deadline = .now() + TimeAmount(duration)
        if wakeUp == nil { scheduleWakeUp(context: context) }
    }

    /// The deadline no longer runs; the pending wake-up finds nothing to do.
    private func cancel() {
        timer = nil
    }

    /// The connection is gone: no wake-up either.
    private func stop() {
        timer = nil
        wakeUp?.cancel()
        wakeUp = nil
    }

    private func scheduleWakeUp(context: ChannelHandlerContext) {
        let loopBound = NIOLoopBound((self, context), eventLoop: context.eventLoop)
        let next = min(timer == nil ? .distantFuture : deadline, answerDeadline ?? .distantFuture, .now() + longestSleep)
        wakeUp = context.eventLoop.scheduleTask(deadline: next) {
            let (handler, context) = loopBound.value
            handler.wokeUp(context: context)
        }
    }

    private func wokeUp(context: ChannelHandlerContext) {
        wakeUp = nil
        let now = NIODeadline.now()
        if let due = answerDeadline, now >= due {
            // The client does not take the answer: nothing can be said to it any more, only closed.
            stop()
            answerDeadline = nil
            context.close(promise: nil)
            return
        }
        if let kind = timer, now >= deadline { expired(kind, context: context) }
        if timer != nil || answerDeadline != nil, wakeUp == nil { scheduleWakeUp(context: context) }
    }

    private func expired(_ kind: Timer, context: ChannelHandlerContext) {
        timer = nil
        switch kind {
        case .idle:
            context.close(promise: nil)
        case .head:
            answer(
                ProblemDetails(.requestTimeout, detail: "the request head did not arrive within \(limits.headTimeout)"),
                context: context)
        case .body:
            // The application reads the body: it fails with RequestTimedOut and answers 408 (a problem,
            // through the one error mapping); the connection closes after that answer, or soon if none comes.
            closeAfterAnswer = true
            context.fireErrorCaught(RequestTimedOut())
            let loopBound = NIOLoopBound(context, eventLoop: context.eventLoop)
            context.eventLoop.scheduleTask(in: .seconds(2)) { loopBound.value.close(promise: nil) }
        }
    }

    /// Writes a problem response of its own (no request reached the application) and closes.
    private func answer(_ problem: ProblemDetails, context: ChannelHandlerContext) {
        cancel()
        var fields = problem.headers
        let body = problem.body
        fields[.contentLength] = String(body.readableBytes)
        fields[.connection] = "close"
        context.write(wrapOutboundOut(.head(HTTPResponse(status: problem.status, headerFields: fields))), promise: nil)
        context.write(wrapOutboundOut(.body(body)), promise: nil)
        context.writeAndFlush(wrapOutboundOut(.end(nil)), promise: nil)
        context.close(promise: nil)
    }
}
