import Crypto
import Foundation

/// What a key or token may do (docs/ARCHITECTURE.md, "Identity").
public enum KeyScope: String, Sendable, Codable, CaseIterable {
    /// Embedded in apps; may only post events for its one app.
    case ingest
    /// Reports and dashboard.
    case read
    /// Catalog, policy and keys.
    case admin
}

/// Secrets of keys and tokens: generated here, shown once, stored only as a SHA-256 digest.
public enum KeySecret {
    /// A new secret such as `upshift_ingest_3q2…` (32 random bytes, base64url).
    public static func generate(scope: KeyScope) -> String {
        "upshift_\(scope.rawValue)_\(randomToken())"
    }

    /// 32 random bytes from the system's generator, base64url without padding (43 characters).
    public static func randomToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: .min ... .max, using: &generator) }
        return Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    /// Whether `text` looks like a secret `generate` makes: `upshift_`, a scope, `_`, and 43 base64url
    /// characters. Anything else is refused before it is hashed or looked up.
    public static func hasShape(_ text: String) -> Bool {
        for scope in KeyScope.allCases {
            let prefix = "upshift_\(scope.rawValue)_"
            guard text.utf8.starts(with: prefix.utf8) else { continue }
            return isRandomToken(text.utf8.dropFirst(prefix.utf8.count))
        }
        return false
    }

    /// Whether `text` has the shape of `randomToken()`: 43 base64url characters (a dashboard session's
    /// cookie). Anything else names no session and is never looked up.
    public static func isRandomToken(_ text: some Collection<UInt8>) -> Bool {
        text.count == 43
            && text.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
            }
    }

    /// The stored form of a secret: the hex SHA-256 of its UTF-8 bytes.
    public static func digest(_ secret: String) -> String {
        SHA256Hex.digest(Data(secret.utf8))
    }
}

/// Hex-encoded SHA-256, for key digests and migration checksums.
public enum SHA256Hex {
    public static func digest(_ data: Data) -> String {
        hex(SHA256.hash(data: data))
    }

    public static func hex(_ digest: SHA256.Digest) -> String {
        // Two digits per byte into one buffer: a string per byte, joined, took most of the time of the
        // look-up of an ingest key, on every request.
        var text = [UInt8]()
        text.reserveCapacity(2 * SHA256.byteCount)
        for byte in digest {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }

    private static let digits = Array("0123456789abcdef".utf8)
}

/// The hex SHA-256 of bytes that arrive in pieces (a file as it is written).
public struct SHA256Stream {
    private var hasher = SHA256()

    public init() {}

    public mutating func update(_ bytes: some DataProtocol) {
        hasher.update(data: bytes)
    }

    public func finish() -> String {
        SHA256Hex.hex(hasher.finalize())
    }
}
