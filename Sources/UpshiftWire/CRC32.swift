/// CRC-32 (ISO-HDLC, the polynomial 0xEDB88320 reflected), as gzip's trailer carries it (RFC 1952 §8):
/// written by the SDK's gzip, checked by the server on the gzip bodies it receives.
public enum CRC32 {
    private static let table: [UInt32] = (0..<256).map { index in
        (0..<8).reduce(UInt32(index)) { crc, _ in crc & 1 == 1 ? 0xEDB8_8320 ^ (crc >> 1) : crc >> 1 }
    }

    public static func checksum<Bytes: Sequence<UInt8>>(_ bytes: Bytes) -> UInt32 {
        table.withUnsafeBufferPointer { table in
            var crc = ~UInt32(0)
            for byte in bytes { crc = table[Int((crc ^ UInt32(byte)) & 0xFF)] ^ (crc >> 8) }
            return ~crc
        }
    }
}
