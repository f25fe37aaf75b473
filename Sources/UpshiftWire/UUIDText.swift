import Foundation

/// UUIDs from text without Foundation's parser (which goes through `sscanf` and showed in the ingestion
/// profile): `8-4-4-4-12` hex digits, either case.
public enum UUIDText {
    public static func parse(_ text: String) -> UUID? {
        var text = text
        return text.withUTF8 { bytes -> UUID? in
            guard bytes.count == 36, bytes[8] == 0x2D, bytes[13] == 0x2D, bytes[18] == 0x2D, bytes[23] == 0x2D else {
                return nil
            }
            var raw = [UInt8](repeating: 0, count: 16)
            var out = 0
            var index = 0
            while index < 36 {
                if index == 8 || index == 13 || index == 18 || index == 23 {
                    index += 1
                    continue
                }
                guard let high = nibble(bytes[index]), let low = nibble(bytes[index + 1]) else { return nil }
                raw[out] = high << 4 | low
                out += 1
                index += 2
            }
            return UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                               raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }

    /// A random (version 4) UUID from the system's generator: two `getrandom` reads, where Foundation's
    /// `UUID()` opens, reads and closes `/dev/urandom` for each (2 % of the server's CPU under checks
    /// that each record an observation).
    public static func random() -> UUID {
        var generator = SystemRandomNumberGenerator()
        var high = generator.next() as UInt64
        var low = generator.next() as UInt64
        high = (high & ~0xF000) | 0x4000  // version 4
        low = (low & ~(0xC000 << 48)) | (0x8000 << 48)  // variant 10
        return withUnsafeBytes(of: (high.bigEndian, low.bigEndian)) { raw in
            UUID(uuid: (raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6], raw[7],
                        raw[8], raw[9], raw[10], raw[11], raw[12], raw[13], raw[14], raw[15]))
        }
    }

    /// The value of an ASCII hex digit, either case (for UUIDs, `\u` escapes and percent-encoding).
    public static func nibble(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
