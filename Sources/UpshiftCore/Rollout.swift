import Crypto
import Foundation

/// Sticky percentage rollouts (DESIGN.md 4.1).
public enum Rollout {
    /// `UInt64(big-endian first 8 bytes of SHA-256("{appId}:{version}:{installId}")) % 10000`, with the
    /// version as written in the catalog and the install id lowercased.
    public static func bucket(appId: String, version: String, installId: String) -> Int {
        let digest = SHA256.hash(data: Data("\(appId):\(version):\(installId.lowercased())".utf8))
        var value: UInt64 = 0
        for byte in digest.prefix(8) { value = value << 8 | UInt64(byte) }
        return Int(value % 10_000)
    }

    /// Whether `release` admits the install: below its percentage and not paused. Without an install id
    /// only releases at 100% admit.
    public static func admits(_ release: Release, appId: String, installId: String?) -> Bool {
        guard !release.rolloutPaused else { return false }
        if release.rolloutPercent >= 100 { return true }
        guard let installId else { return false }
        // Percentages like 6.63 are not exact in binary (6.63 × 100 = 663.0000000000001): compare with
        // a tolerance far below one bucket so that bucket 663 is not admitted at 6.63%.
        let threshold = release.rolloutPercent * 100 - 1e-7
        return Double(bucket(appId: appId, version: release.version.text, installId: installId)) < threshold
    }
}
