import Testing
import UpshiftCore

/// The CRC-32 of gzip's trailer, which the SDK writes and ingestion checks: the catalogue's check value
/// (CRC-32/ISO-HDLC of "123456789") and the trailer the system's gzip wrote for a known input.
@Suite struct CRC32Tests {
    @Test func theCheckValueAndAGzipTrailer() {
        #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
        #expect(CRC32.checksum([UInt8]()) == 0)
        // `printf 'The quick brown fox jumps over the lazy dog' | gzip | tail -c 8 | od -An -tx4`: 414fa339, 0000002b.
        #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
    }
}
