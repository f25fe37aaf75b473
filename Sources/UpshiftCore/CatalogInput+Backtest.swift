import Foundation

/// The body of the policy backtest (`POST /v1/apps/{app}/preview`): a proposed change in the admin API's shapes.
extension CatalogInput {
    /// A proposed change of one platform's catalog, for the policy backtest, in the admin API's shapes:
    /// `policy` a whole policy as `PUT` takes it, `releases` an edit per existing release (version → the
    /// body `PATCH` takes), `newReleases` releases not in the catalog yet (bodies `POST` takes). Errors name the member: `policy.minimumVersion`, `releases.2.0.rolloutPercent`.
    public static func proposal(_ body: JSONValue, to catalog: AppCatalog, platform: Platform, now: Date) throws(FieldError)
        -> AppCatalog
    {
        let fields = try Fields(body, allowed: ["policy", "releases", "newReleases"])
        var proposed = catalog
        for (index, release) in try newReleases(body, platform: platform, now: now).enumerated() {
            guard proposed.release(platform: platform, version: release.version) == nil else {
                throw FieldError("newReleases[\(index)].version", "\(release.version.text) exists on \(platform)", kind: .inconsistent)
            }
            proposed.upsert(release)
        }
        if let value = fields.object["policy"], !value.isNull {
            do throws(FieldError) {
                var policy = try CatalogInput.policy(value)
                _ = try reason(value)
                try checkMinimumBelowTarget(policy)
                policy.revision = catalog.policy(for: platform).revision
                proposed.policies[platform] = policy
            } catch {
                throw error.inside("policy")
            }
        }
        if let value = fields.object["releases"], !value.isNull {
            guard let edits = value.objectValue else { throw FieldError("releases", "must be an object of version → edit") }
            guard edits.count <= 1_000 else { throw FieldError("releases", "at most 1000 releases") }
            for (text, edit) in edits.sorted(by: { $0.key < $1.key }) {
                let name = "releases.\(text)"
                guard let version = Version(text) else { throw FieldError(name, "not a valid version") }
                guard let release = catalog.release(platform: platform, version: version) else {
                    throw FieldError(name, "no release \(text) on \(platform)", kind: .inconsistent)
                }
                do throws(FieldError) {
                    proposed.upsert(try releasePatch(edit, to: release, now: now))
                    _ = try reason(edit)
                } catch {
                    throw error.inside(name)
                }
            }
        }
        return proposed
    }

    /// At most this many new releases in one backtest.
    public static let maximumNewReleases = 10

    /// The backtest's `newReleases`: bodies of `POST …/releases`, validated as such (errors name
    /// `newReleases[i].field`), each on the backtest's `platform` (`422` otherwise).
    public static func newReleases(_ body: JSONValue, platform: Platform, now: Date) throws(FieldError) -> [Release] {
        guard let value = body["newReleases"], !value.isNull else { return [] }
        guard case .array(let items) = value else { throw FieldError("newReleases", "must be an array of releases") }
        guard items.count <= maximumNewReleases else { throw FieldError("newReleases", "at most \(maximumNewReleases) releases") }
        var releases: [Release] = []
        for (index, item) in items.enumerated() {
            let name = "newReleases[\(index)]"
            do throws(FieldError) {
                let created = try release(item, now: now)
                _ = try reason(item)
                guard created.platform == platform else {
                    throw FieldError("platform", "the backtest is of \(platform): \(created.platform) is another", kind: .inconsistent)
                }
                releases.append(created)
            } catch {
                throw error.inside(name)
            }
        }
        return releases
    }
}
