import CompressNIO
import NIOCore

/// One gzip member written in pieces (compress-nio's zlib), for an answer compressed as it is read:
/// ``compress(_:)`` each piece, then ``finish()`` once for the rest and the trailer (CRC-32 and length).
/// A stream that ends without ``finish()`` has no trailer, so a reader can tell it was cut off.
public struct GzipStream {
    private let compressor: ZlibCompressor

    public init() throws {
        compressor = try ZlibCompressor(algorithm: .gzip)
    }

    /// What `piece` compresses to so far (zlib may keep some of it until later pieces or ``finish()``).
    public func compress(_ piece: ByteBuffer) throws -> ByteBuffer {
        guard piece.readableBytes > 0 else { return ByteBuffer() }
        return try deflate(piece, flush: .no)
    }

    /// The rest of the member: what zlib kept, and the trailer.
    public func finish() throws -> ByteBuffer {
        try deflate(ByteBuffer(), flush: .finish)
    }

    /// Deflates all of `input` into as many output buffers as it takes; `.finish` until the stream ends.
    private func deflate(_ input: ByteBuffer, flush: CompressNIOFlush) throws -> ByteBuffer {
        var input = input
        var output = ByteBuffer()
        while true {
            var chunk = ByteBufferAllocator().buffer(capacity: max(compressor.maxSize(from: input), 4_096))
            do {
                try compressor.deflate(from: &input, to: &chunk, flush: flush)
                output.writeBuffer(&chunk)
                if flush == .finish || input.readableBytes == 0 { return output }
            } catch let error as CompressNIOError where error == .bufferOverflow {
                // The output was full: keep what it holds and go on into a fresh one.
                output.writeBuffer(&chunk)
            }
        }
    }
}

/// One gzip member read in pieces (compress-nio's zlib, which checks the trailer's CRC-32 and length):
/// ``decompress(_:)`` each piece of the file as it is read. Bytes after the member are ignored; a member cut
/// off yields less, which the reader must notice (an archive's rows are checked against its `.rows`).
public struct GunzipStream {
    private let decompressor: ZlibDecompressor

    public init() throws {
        decompressor = try ZlibDecompressor(algorithm: .gzip)
    }

    /// All that `piece` decompresses to, given the pieces before it.
    public func decompress(_ piece: ByteBuffer) throws -> ByteBuffer {
        var input = piece
        var output = ByteBuffer()
        while input.readableBytes > 0 {
            var chunk = ByteBufferAllocator().buffer(capacity: max(input.readableBytes * 4, 65_536))
            do {
                try decompressor.inflate(from: &input, to: &chunk)
                output.writeBuffer(&chunk)
                // Returned without an error: all of the input was taken, or the member ended before it.
                return output
            } catch let error as CompressNIOError where error == .bufferOverflow {
                output.writeBuffer(&chunk)  // the output was full: keep it and go on
            } catch let error as CompressNIOError where error == .inputBufferOverflow {
                output.writeBuffer(&chunk)  // it needs the next piece
                return output
            }
        }
        return output
    }
}
