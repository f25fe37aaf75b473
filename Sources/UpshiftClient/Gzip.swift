import UpshiftWire

/// gzip (RFC 1952) of one DEFLATE block with the fixed Huffman codes (RFC 1951 §3.2.6) and LZ77 matches
/// found through a hash of 3 bytes: what event batches need (their JSON repeats the same names and values
/// in every event) without a compression library, which Foundation does not offer on every platform.
enum Gzip {
    static func compress(_ input: [UInt8]) -> [UInt8] {
        var output: [UInt8] = [0x1F, 0x8B, 8, 0, 0, 0, 0, 0, 0, 0xFF]  // no name, no time, unknown OS
        var bits = BitWriter()
        bits.write(1, count: 1)  // the final block
        bits.write(1, count: 2)  // fixed Huffman codes
        deflate(input, into: &bits)
        bits.writeCode(256)  // end of block
        output += bits.finish()
        for value in [CRC32.checksum(input), UInt32(truncatingIfNeeded: input.count)] {
            for shift in stride(from: 0, to: 32, by: 8) { output.append(UInt8(truncatingIfNeeded: value >> UInt32(shift))) }
        }
        return output
    }

    private static let window = 32_768
    private static let maximumMatch = 258
    /// Candidates tried per position: enough for repeated JSON, cheap for the rest.
    private static let chainLimit = 16

    private static func deflate(_ input: [UInt8], into bits: inout BitWriter) {
        let hashSize = 1 << 15
        var head = [Int](repeating: -1, count: hashSize)
        var previous = [Int](repeating: -1, count: input.count)
        func hash(_ position: Int) -> Int {
            (Int(input[position]) << 10 ^ Int(input[position + 1]) << 5 ^ Int(input[position + 2])) & (hashSize - 1)
        }
        func insert(_ position: Int) {
            guard position + 2 < input.count else { return }
            let key = hash(position)
            previous[position] = head[key]
            head[key] = position
        }
        var position = 0
        while position < input.count {
            var bestLength = 0
            var bestDistance = 0
            if position + 2 < input.count {
                var candidate = head[hash(position)]
                var tries = 0
                let limit = min(maximumMatch, input.count - position)
                while candidate >= 0, position - candidate <= window, tries < chainLimit {
                    var length = 0
                    while length < limit, input[candidate + length] == input[position + length] { length += 1 }
                    if length > bestLength {
                        bestLength = length
                        bestDistance = position - candidate
                        if length == limit { break }
                    }
                    candidate = previous[candidate]
                    tries += 1
                }
            }
            if bestLength >= 3 {
                bits.writeLength(bestLength)
                bits.writeDistance(bestDistance)
                for offset in 0..<bestLength { insert(position + offset) }
                position += bestLength
            } else {
                bits.writeCode(Int(input[position]))
                insert(position)
                position += 1
            }
        }
    }
}

/// Bits of a DEFLATE stream, least significant first; Huffman codes go most significant bit first.
struct BitWriter {
    private var buffer: UInt64 = 0
    private var count = 0
    private var bytes: [UInt8] = []

    mutating func write(_ value: Int, count bitCount: Int) {
        buffer |= UInt64(value) << UInt64(count)
        count += bitCount
        while count >= 8 {
            bytes.append(UInt8(truncatingIfNeeded: buffer))
            buffer >>= 8
            count -= 8
        }
    }

    private mutating func writeHuffman(_ code: Int, length: Int) {
        var reversed = 0
        for bit in 0..<length where code & (1 << bit) != 0 { reversed |= 1 << (length - 1 - bit) }
        write(reversed, count: length)
    }

    /// A literal byte (0–255), the end of block (256) or a length code (257–285), in the fixed code.
    mutating func writeCode(_ symbol: Int) {
        switch symbol {
        case 0...143: writeHuffman(0x30 + symbol, length: 8)
        case 144...255: writeHuffman(0x190 + symbol - 144, length: 9)
        case 256...279: writeHuffman(symbol - 256, length: 7)
        default: writeHuffman(0xC0 + symbol - 280, length: 8)
        }
    }

    private static let lengthBases = [
        3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258,
    ]
    private static let lengthExtra = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0]
    private static let distanceBases = [
        1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097,
        6145, 8193, 12289, 16385, 24577,
    ]
    private static let distanceExtra = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13]

    /// A match length of 3–258.
    mutating func writeLength(_ length: Int) {
        let index = Self.lengthBases.lastIndex { $0 <= length }!
        writeCode(257 + index)
        write(length - Self.lengthBases[index], count: Self.lengthExtra[index])
    }

    /// A match distance of 1–32,768 (fixed 5-bit codes).
    mutating func writeDistance(_ distance: Int) {
        let index = Self.distanceBases.lastIndex { $0 <= distance }!
        writeHuffman(index, length: 5)
        write(distance - Self.distanceBases[index], count: Self.distanceExtra[index])
    }

    /// The bytes, the last one padded with zero bits.
    mutating func finish() -> [UInt8] {
        if count > 0 { bytes.append(UInt8(truncatingIfNeeded: buffer)) }
        buffer = 0
        count = 0
        return bytes
    }
}

