import Crypto
import Foundation

/// Sticky percentage rollouts (docs/ARCHITECTURE.md, "The decision rules", step 4).
public enum Rollout {
    /// `UInt64(big-endian first 8 bytes of SHA-256("{appId}:{version}:{installId}")) % 10000`, with the
    /// version as written in the catalog and the install id lowercased.
    public static func bucket(appId: AppID, version: String, installId: String) -> Int {
        bucket(of: SHA256.hash(data: Data("\(appId.rawValue):\(version):\(installId.lowercased())".utf8)))
    }

    /// The bucket a digest of `"{appId}:{version}:{installId}"` gives.
    static func bucket(of digest: SHA256.Digest) -> Int {
        digest.withUnsafeBytes { bytes in
            var value: UInt64 = 0
            for index in 0..<8 { value = value << 8 | UInt64(bytes[index]) }
            return Int(value % 10_000)
        }
    }

    /// The buckets of many installs for one release (the policy backtest hashes a fleet): what
    /// ``bucket(appId:version:installId:)`` gives for each install, its 16 bytes written as the lowercase
    /// text of its UUID into one reused message instead of a string per install.
    public struct Hasher: Sendable {
        private var message: [UInt8]
        private let prefixLength: Int

        public init(appId: AppID, version: String) {
            message = Array("\(appId.rawValue):\(version):".utf8)
            prefixLength = message.count
            message += [UInt8](repeating: 0, count: 36)
        }

        /// The bucket of the install whose UUID is the 16 bytes at `offset` of `ids`.
        public mutating func bucket(ofInstallAt offset: Int, in ids: UnsafeRawBufferPointer) -> Int {
            let prefixLength = self.prefixLength
            return message.withUnsafeMutableBytes { text in
                var at = prefixLength
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        text[at] = UInt8(ascii: "-")
                        at += 1
                    }
                    let byte = ids[offset + index]
                    text[at] = Self.hexDigit(byte >> 4)
                    text[at + 1] = Self.hexDigit(byte & 0x0f)
                    at += 2
                }
                var digest = SHA256()
                digest.update(bufferPointer: UnsafeRawBufferPointer(text))
                return Rollout.bucket(of: digest.finalize())
            }
        }

        /// `0`–`9`, `a`–`f` for a value below 16 (no table: a static one costs a lazy-initialization check
        /// per access, 32 per install).
        private static func hexDigit(_ value: UInt8) -> UInt8 {
            value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
        }

        /// The install's bucket.
        public mutating func bucket(of install: UUID) -> Int {
            withUnsafeBytes(of: install.uuid) { bucket(ofInstallAt: 0, in: $0) }
        }
    }

    /// Whether `release` admits the install: below its percentage and not paused. Without an install id
    /// only releases at 100% admit.
    public static func admits(_ release: Release, appId: AppID, installId: String?) -> Bool {
        guard !release.rolloutPaused else { return false }
        if release.rolloutPercent >= 100 { return true }
        guard let installId else { return false }
        return admits(bucket: bucket(appId: appId, version: release.version.text, installId: installId),
                      percent: release.rolloutPercent)
    }

    /// Whether a rollout at `percent` admits `bucket`.
    public static func admits(bucket: Int, percent: Double) -> Bool {
        bucket < admittedBuckets(percent: percent)
    }

    /// How many buckets a rollout at `percent` admits: those below the number returned.
    public static func admittedBuckets(percent: Double) -> Int {
        guard percent > 0 else { return 0 }
        guard percent < 100 else { return 10_000 }
        // Percentages like 6.63 are not exact in binary (6.63 × 100 = 663.0000000000001): compare with
        // a tolerance far below one bucket so that bucket 663 is not admitted at 6.63%.
        return Int((percent * 100 - 1e-7).rounded(.up))
    }
}

/// One rise of the share of installs a release admits: from `at`, every bucket below `percent × 100`.
public struct RolloutStep: Sendable, Equatable, Codable {
    public var at: Date
    public var percent: Double

    public init(at: Date, percent: Double) {
        self.at = at
        self.percent = percent
    }
}

extension Release {
    /// Records in ``rolloutHistory`` that from `now` this release admits its percentage, when that is
    /// more than it ever admitted (`previous` is the release before the write, nil when it is new). A
    /// release written before the history was kept starts it with what it admitted then, from its
    /// `releasedAt`.
    public mutating func recordRollout(at now: Date, previous: Release?) {
        var history = rolloutHistory ?? []
        if rolloutHistory == nil, let previous, !previous.rolloutPaused, previous.rolloutPercent > 0 {
            history = [RolloutStep(at: previous.releasedAt, percent: previous.rolloutPercent)]
        }
        if !rolloutPaused, rolloutPercent > 0, rolloutPercent > history.last?.percent ?? 0 {
            history.append(RolloutStep(at: now, percent: rolloutPercent))
        }
        rolloutHistory = history
    }
}

/// What the check's `stalenessDays` for an offered release depends on besides the install and the clock:
/// when the release was old enough to notify about and how its rollout admitted installs. Small, so that
/// cached answers can keep it without keeping the release.
public struct Staleness: Sendable, Equatable {
    let appId: AppID
    let version: String
    let releasedAt: Date
    let notified: Date
    let rolloutPercent: Double
    let rolloutHistory: [RolloutStep]?

    public init(_ release: Release, policy: Policy, appId: AppID) {
        self.appId = appId
        version = release.version.text
        releasedAt = release.releasedAt
        notified = release.releasedAt.addingTimeInterval((policy.notifyAfterDays ?? 0) * 86_400)
        rolloutPercent = release.rolloutPercent
        rolloutHistory = release.rolloutHistory
    }

    /// Whole days since the release became offerable to the install: the later of `releasedAt` plus
    /// `notifyAfterDays` and the moment its rollout first admitted the install (not yet: 0).
    public func days(installId: String, now: Date) -> Int {
        let since = max(notified, firstAdmitted(installId: installId) ?? now)
        return max(0, Int((now.timeIntervalSince(since) / 86_400).rounded(.down)))
    }

    /// When the rollout first admitted the install, nil while it never has. Without a history (written
    /// before it was kept), an install its percentage admits counts from `releasedAt`.
    func firstAdmitted(installId: String) -> Date? {
        let bucket = { Rollout.bucket(appId: appId, version: version, installId: installId) }
        guard let history = rolloutHistory else {
            return rolloutPercent >= 100 || Rollout.admits(bucket: bucket(), percent: rolloutPercent) ? releasedAt : nil
        }
        guard let first = history.first else { return nil }
        if first.percent >= 100 { return first.at }  // every install at once: no bucket to compute
        let installBucket = bucket()
        return history.first { Rollout.admits(bucket: installBucket, percent: $0.percent) }?.at
    }
}
