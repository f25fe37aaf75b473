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
    /// A release's share of active installs reached a threshold the subscription names, on a UTC day that closed.
    case adoptionCrossed = "adoption.crossed"
    /// A health rule's condition held for a release (its threshold crossed, or its guarded test rejected), whatever
    /// the rule's state.
    case healthRegressed = "health.regressed"

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

/// When a release's share of active installs first reached each threshold (docs/OPERATIONS.md, "Webhooks"): the
/// share of a day is the installs active that day on the release or a newer version over all installs active
/// that day, as the adoption report counts them.
public enum AdoptionCrossing {
    /// The thresholds a subscription may name: percents above 0 and at most 100, at most this many.
    public static let maximumThresholds = 10

    /// Why a subscription's thresholds are refused.
    public struct Refusal: Error, CustomStringConvertible {
        public let description: String
    }

    /// A subscription's thresholds as given (`literals`: JSON number literals; nil: none given), checked
    /// against its `kinds`: given with `adoption.crossed` and only with it, 1 to ``maximumThresholds`` distinct
    /// percents above 0 and at most 100 with at most two decimals. Returned in increasing order.
    public static func thresholds(_ literals: [String]?, kinds: [WebhookKind]) throws -> [Double] {
        let crossed = kinds.contains(.adoptionCrossed)
        guard let literals else {
            guard !crossed else {
                throw Refusal(
                    description: "thresholds is required with adoption.crossed: the shares of active installs to tell, in percent, such as [50, 90]")
            }
            return []
        }
        guard crossed else { throw Refusal(description: "thresholds applies to adoption.crossed only, which kinds does not name") }
        guard !literals.isEmpty, literals.count <= maximumThresholds else {
            throw Refusal(description: "thresholds must be 1 to \(maximumThresholds) percents")
        }
        var thresholds: [Double] = []
        for literal in literals {
            guard let percent = JSONNumber(literal: literal)?.value(in: 0...100, places: 2), percent > 0 else {
                throw Refusal(
                    description: "thresholds holds \(literal.prefix(40)): each is a percent above 0 and at most 100, with at most two decimals, such as 50")
            }
            guard !thresholds.contains(percent) else { throw Refusal(description: "thresholds names \(literal) twice") }
            thresholds.append(percent)
        }
        return thresholds.sorted()
    }

    public struct Crossing: Sendable, Equatable {
        /// The threshold reached, in percent.
        public var threshold: Double
        /// The first day whose share reached it.
        public var day: String
        /// That day's share, in percent.
        public var percent: Double
        public var activeInstalls: Int
        public var installs: Int
    }

    /// The share of `day` on `release` or newer, in percent, and the installs it counts; nil for a day with no
    /// active install.
    public static func share(of day: AdoptionReport.Day, release: Version) -> (percent: Double, installs: Int)? {
        guard day.activeInstalls > 0 else { return nil }
        let installs = day.versions.reduce(0) { sum, cell in
            guard let version = Version(cell.version), version >= release else { return sum }
            return sum + cell.installs
        }
        return (100 * Double(installs) / Double(day.activeInstalls), installs)
    }

    /// For each of `thresholds` that `days` (in order) reached, the first day that did.
    public static func crossings(_ days: [AdoptionReport.Day], release: Version, thresholds: [Double]) -> [Crossing] {
        var left = Set(thresholds)
        var found: [Crossing] = []
        for day in days where !left.isEmpty {
            guard let share = share(of: day, release: release) else { continue }
            for threshold in left.sorted() where share.percent >= threshold {
                left.remove(threshold)
                found.append(
                    Crossing(threshold: threshold, day: day.day, percent: share.percent, activeInstalls: day.activeInstalls,
                        installs: share.installs))
            }
        }
        return found
    }
}

/// How a subscription's deliveries are written: Upshift's signed JSON, or a Slack incoming webhook's body.
public enum WebhookFormat: String, Sendable, Codable, CaseIterable {
    case json
    case slack
}

/// A delivery as a Slack incoming webhook takes it: `{"text": …}`, one line that says what happened and, with
/// a public URL, links to the dashboard's page of it (docs/OPERATIONS.md, "Webhooks").
public enum SlackMessage {
    /// The Slack body of a delivery whose JSON body is `body`.
    public static func body(from body: Data, publicURL: String?) -> Data {
        let value = (try? JSONValue.parse(body)) ?? .object([:])
        let (line, path) = summary(value)
        var text = escape(line)
        if let publicURL, let path { text += " <\(escape(publicURL + path))|open>" }
        return (try? JSONEncoder().encode(["text": text])) ?? Data(#"{"text":""}"#.utf8)
    }

    /// The line, and the dashboard path it links to.
    static func summary(_ value: JSONValue) -> (String, String?) {
        let app = value["app"]?.stringValue ?? "?"
        let appPath = "/dashboard/apps/" + (app.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? app)
        let kind = value["kind"]?.stringValue ?? "?"
        if kind == WebhookKind.adoptionCrossed.rawValue || kind == WebhookKind.healthRegressed.rawValue {
            let platform = value["platform"]?.stringValue ?? ""
            let version = value["version"]?.stringValue ?? "?"
            let path = appPath + "/releases/" + (version.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["."])) ?? version)
                + "?platform=" + platform
            if kind == WebhookKind.healthRegressed.rawValue {
                let rule = value["rule"]?.stringValue ?? "?"
                return ("\(app) \(platform) \(version): health regressed (rule \(rule)): \(value["summary"]?.stringValue ?? "")", path)
            }
            let threshold = value["threshold"]?.description ?? "?"
            return ("\(app) \(platform) \(version): \(threshold) % of active installs on \(value["day"]?.stringValue ?? "?")", path)
        }
        if let record = value["record"] {
            let rule = record["ruleId"]?.stringValue ?? "?"
            let verb = kind == WebhookKind.ruleFired.rawValue ? "acted" : "would act"
            let summary = record["summary"]?.stringValue ?? ""
            return ("\(app): rule \(rule) \(verb) (\(record["action"]?.stringValue ?? "no action")): \(summary)", appPath + "/rules")
        }
        guard let entry = value["entry"] else { return ("\(app): \(kind)", appPath) }
        let platform = entry["platform"]?.stringValue ?? ""
        let by = "by \(entry["actor"]?.stringValue ?? "?")" + (entry["reason"]?.stringValue.map { ": \($0)" } ?? "")
        if let version = entry["releaseVersion"]?.stringValue {
            let path = appPath + "/releases/" + (version.addingPercentEncoding(withAllowedCharacters: .alphanumerics.union(["."])) ?? version)
                + "?platform=" + platform
            var what = entry["type"]?.stringValue == "release_added" ? "added" : "changed"
            if kind == WebhookKind.scheduleStep.rawValue, let schedule = entry["schedule"] {
                if let held = schedule["held"]?.stringValue {
                    what = "step held: \(held)"
                } else if let percent = schedule["percent"], case .number = percent {
                    what = "schedule step to \(percent.description) %"
                }
            }
            return ("\(app) \(platform) \(version): \(what) \(by)", path)
        }
        return ("\(app) \(platform): policy replaced \(by)", appPath + "/rollout?platform=" + platform)
    }

    /// Slack's escaping of text: `&`, `<` and `>`.
    static func escape(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
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
