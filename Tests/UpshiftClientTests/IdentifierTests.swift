import Foundation
import Testing

@testable import UpshiftClient

/// The ids the SDK makes: UUIDv5 (the `updated` event's, the same on every attempt) against the known
/// answers of the RFCs, over the SDK's own SHA-1; UUIDv7 that sorts by time.
@Suite struct IdentifierTests {
    /// RFC 4122 appendix C: the DNS namespace.
    static let dns = UUID(uuidString: "6ba7b810-9dad-11d1-80b4-00c04fd430c8")!

    @Test func uuidVersion5GivesTheKnownAnswer() {
        // The name-based example of RFC 9562 (and of Python's uuid.uuid5, Java, Go, …).
        #expect(UUIDv5.make("www.example.com", namespace: Self.dns) == UUID(uuidString: "2ed6657d-e927-568b-95e1-2665a8aea6a2"))
        #expect(UUIDv5.make("python.org", namespace: Self.dns) == UUID(uuidString: "886313e1-3b8a-5372-9b90-0c9aee199e5d"))
        #expect(UUIDv5.make("a") == UUIDv5.make("a"))
        #expect(UUIDv5.make("a") != UUIDv5.make("b"))
    }

    @Test(arguments: [
        ("", "da39a3ee5e6b4b0d3255bfef95601890afd80709"),
        ("abc", "a9993e364706816aba3e25717850c26c9cd0d89d"),
        // 56 bytes: the padding spills into a second block.
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
    ])
    func sha1GivesTheFIPSAnswers(_ message: String, _ digest: String) {
        #expect(SHA1.digest(Array(message.utf8)).map { String(format: "%02x", $0) }.joined() == digest)
    }

    @Test func uuidVersion7SortsByTime() {
        let early = UUIDv7.make(at: Date(timeIntervalSince1970: 1_780_000_000))
        let late = UUIDv7.make(at: Date(timeIntervalSince1970: 1_780_000_001))
        #expect(early.uuidString.lowercased() < late.uuidString.lowercased())
        #expect(early.uuidString.lowercased().hasPrefix("019e"))  // 1,780,000,000,000 ms is 0x019E…
        #expect(Array(early.uuidString)[14] == "7")
    }
}
