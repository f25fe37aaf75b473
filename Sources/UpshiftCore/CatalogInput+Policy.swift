import Foundation

/// The body of a policy: `PUT /v1/apps/{app}/policies/{platform}`.
extension CatalogInput {
    /// A minimum above the target would block installs from the versions the policy offers.
    public static func checkMinimumBelowTarget(_ policy: Policy) throws(FieldError) {
        if let minimum = policy.minimumVersion, let target = policy.targetVersion, minimum > target {
            throw FieldError("minimumVersion", "is above targetVersion \(target)", kind: .inconsistent)
        }
    }

    /// A whole policy (`PUT` replaces it): `enabled` is required, every other field optional.
    public static func policy(_ body: JSONValue) throws(FieldError) -> Policy {
        let fields = try Fields(
            body,
            allowed: [
                "enabled", "minimumVersion", "targetVersion", "blockedVersions", "notifyAfterDays", "blockAfterDays",
                "versionsBehindThreshold", "remindIntervalSeconds", "checkIntervalSeconds", "allowSkip", "reason",
                "revision",  // a policy as read may be sent back; the revision that counts is If-Match
            ])
        guard let enabled = try fields.bool("enabled") else { throw FieldError("enabled", "is required") }
        var policy = Policy(enabled: enabled)
        policy.minimumVersion = try fields.version("minimumVersion", required: false)
        policy.targetVersion = try fields.version("targetVersion", required: false)
        try checkMinimumBelowTarget(policy)
        if let blocked = try fields.array("blockedVersions") {
            guard blocked.count <= 1_000 else { throw FieldError("blockedVersions", "at most 1000 versions") }
            policy.blockedVersions = try blocked.enumerated().map { (index, value) throws(FieldError) in
                guard let text = value.stringValue, let version = Version(text) else {
                    throw FieldError("blockedVersions[\(index)]", "not a valid version")
                }
                return version
            }
        }
        policy.notifyAfterDays = try fields.decimal("notifyAfterDays", in: 0...3_650, places: dayPlaces)
        policy.blockAfterDays = try fields.decimal("blockAfterDays", in: 0...3_650, places: dayPlaces)
        policy.versionsBehindThreshold =
            try fields.integer("versionsBehindThreshold", in: 1...1_000) ?? Policy.defaultVersionsBehindThreshold
        policy.remindIntervalSeconds =
            try fields.integer("remindIntervalSeconds", in: 0...31_536_000) ?? Policy.defaultRemindIntervalSeconds
        policy.checkIntervalSeconds =
            try fields.integer("checkIntervalSeconds", in: 0...31_536_000) ?? Policy.defaultCheckIntervalSeconds
        policy.allowSkip = try fields.bool("allowSkip") ?? true
        return policy
    }
}
