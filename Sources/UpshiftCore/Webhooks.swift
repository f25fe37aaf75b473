import Crypto
import Foundation

/// What a webhook subscription is told of (docs/OPERATIONS.md, "Webhooks").
public enum WebhookKind: String, Sendable, Codable, CaseIterable {
    /// A release added or changed (by a person, the API, a schedule or a rule).
    case releaseChanged = "release.changed"
    /// A platform's policy replaced.
    case policyChanged = "policy.changed"
    /// A rollout schedule applied a step, or a rule held one (the release's write by the rollout worker).
    case scheduleStep = "schedule.step"
    /// A live rule acted (halted a release, raised a minimum), with the figures it saw and its backtest.
    case ruleFired = "rule.fired"
    /// A dry-run rule would have acted.
    case ruleWouldFire = "rule.would_fire"

    /// The kind a rule's record is delivered as; nil for the records no subscription can ask for.
    public static func of(_ outcome: RuleRecord.Outcome) -> WebhookKind? {
        switch outcome {
        case .acted: .ruleFired
        case .wouldAct: .ruleWouldFire
        case .failed, .skipped, .idle, .standsAside: nil
        }
    }

    /// The kinds a catalog event is delivered as, each to the subscriptions that ask for it.
    public static func of(_ event: CatalogEvent) -> [WebhookKind] {
        switch event.kind {
        case .releaseAdded, .releaseUpdated:
            let step = event.schedule.map { $0.step != nil || $0.held != nil } ?? false
            return step ? [.releaseChanged, .scheduleStep] : [.releaseChanged]
        case .policyReplaced: return [.policyChanged]
        case .appCreated, .appUpdated, .ruleReplaced, .ruleRemoved: return []
        }
    }
}

/// The `Upshift-Signature` header of a delivery: `t=<unix seconds>,v1=<hex HMAC-SHA256(secret, t + "." + body)>`,
/// with a second `v1` for the previous secret while a rotation's grace period lasts.
public enum WebhookSignature {
    public static func header(body: Data, at timestamp: Int, secrets: [String]) -> String {
        (["t=\(timestamp)"] + secrets.map { "v1=\(sign(body: body, at: timestamp, secret: $0))" }).joined(separator: ",")
    }

    public static func sign(body: Data, at timestamp: Int, secret: String) -> String {
        var message = Data("\(timestamp).".utf8)
        message.append(body)
        let code = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: Data(secret.utf8)))
        return Data(code).map { String(format: "%02x", $0) }.joined()
    }

    /// A new secret: 32 random bytes, hexadecimal, prefixed so that it is recognised when it leaks.
    public static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + bytes.map { String(format: "%02x", $0) }.joined()
    }
}

/// When a failed delivery is tried again: 30 s × 2ⁿ after the n-th attempt (n from 0), at most an hour,
/// ± 20 % jitter; none once the delivery is a day old.
public enum WebhookBackoff {
    public static let giveUpAfter: TimeInterval = 24 * 3_600

    /// The delay after `attempts` attempts (1 after the first), with `jitter` in [-1, 1].
    public static func delay(afterAttempts attempts: Int, jitter: Double) -> TimeInterval {
        let base = min(3_600, 30 * pow(2, Double(max(0, min(attempts - 1, 20)))))
        return base * (1 + 0.2 * max(-1, min(1, jitter)))
    }
}
