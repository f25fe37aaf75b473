import Foundation
import Hummingbird
import UpshiftCore
import UpshiftStore

/// The forms of the rollout and overview pages. Each becomes the JSON body the admin API takes and
/// goes through `CatalogInput` and `CatalogStore` exactly as the API's write does, with the revision
/// the form was rendered with.
enum RolloutForms {
    /// The policy form: every field of the policy, as text (an unticked box is absent).
    struct Policy: CatalogWriteForm {
        var platform, revision, reason: String?
        var enabled, allowSkip, blockedVersions, minimumVersion, targetVersion: String?
        var notifyAfterDays, blockAfterDays, versionsBehindThreshold, remindIntervalSeconds, checkIntervalSeconds: String?

        /// The policy as the API's `PUT` body.
        func body() throws -> JSONValue {
            var body: [String: JSONValue] = [
                "enabled": .bool(enabled == "true"),
                "allowSkip": .bool(allowSkip == "true"),
                "blockedVersions": .array(
                    (blockedVersions ?? "").split(separator: ",").map { .string($0.trimmingCharacters(in: .whitespaces)) }
                        .filter { $0.stringValue?.isEmpty == false }),
            ]
            for (name, value) in [("minimumVersion", minimumVersion), ("targetVersion", targetVersion)] {
                if let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty { body[name] = .string(text) }
            }
            let numbers = [
                ("notifyAfterDays", notifyAfterDays), ("blockAfterDays", blockAfterDays),
                ("versionsBehindThreshold", versionsBehindThreshold), ("remindIntervalSeconds", remindIntervalSeconds),
                ("checkIntervalSeconds", checkIntervalSeconds),
            ]
            for (name, value) in numbers {
                guard let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { continue }
                guard let number = JSONNumber(literal: text) else {
                    throw ProblemDetails.badRequest("\(name): \(text) is not a number", field: name)
                }
                body[name] = .number(number)
            }
            return .object(body)
        }
    }

    /// A previewed minimum, applied to the policy the preview was made against.
    struct Minimum: CatalogWriteForm {
        var platform, revision, reason, minimumVersion: String?
    }

    /// A release to add (the rollout page's "Add a release"): previewed first, then added.
    struct NewRelease: CatalogWriteForm {
        var platform, revision, reason: String?
        var version, releasedAt, rolloutPercent, minimumOSVersion, note: String?

        /// The release as the API's `POST …/releases` body.
        func body(platform: Platform) throws(FieldError) -> JSONValue {
            var body: [String: JSONValue] = ["platform": .string(platform.rawValue)]
            for (name, value) in [("version", version), ("releasedAt", releasedAt), ("minimumOSVersion", minimumOSVersion)] {
                if let text = value?.trimmingCharacters(in: .whitespaces), !text.isEmpty { body[name] = .string(text) }
            }
            if let text = rolloutPercent?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
                guard let number = JSONNumber(literal: text) else { throw FieldError("rolloutPercent", "\(text) is not a number") }
                body["rolloutPercent"] = .number(number)
            }
            if let text = note?.trimmingCharacters(in: .whitespaces), !text.isEmpty {
                body["notes"] = .object(["en": .array([.string(text)])])
            }
            return .object(body)
        }
    }

    /// A change of one release: a ``ReleaseAction`` by its form value (`rollout` with `percent`).
    struct ReleaseChange: CatalogWriteForm {
        var platform, revision, reason, action, percent: String?

        /// The change as the API's `PATCH` body.
        func releaseAction() throws -> ReleaseAction {
            guard let action = action.flatMap(ReleaseAction.init(rawValue:)) else {
                throw ProblemDetails.badRequest("action: one of \(ReleaseAction.names)", field: "action")
            }
            return action
        }

        /// The change as the API's `PATCH` body.
        func patch() throws -> JSONValue {
            let number = percent.flatMap { JSONNumber(literal: $0.trimmingCharacters(in: .whitespaces)) }
            return .object(try releaseAction().patch(percent: number))
        }
    }
}

extension DashboardPages {
    /// `POST /dashboard/apps/{app}/policy`
    @Sendable func savePolicy(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = try await DashboardForm.decode(RolloutForms.Policy.self, from: request)
        let (platform, revision, reason) = try form.writeContext()
        let policy = try CatalogInput.policy(try form.body())
        return try await replace(appId, platform, policy, revision: revision, reason: reason, identity: identity)
    }

    /// `POST /dashboard/apps/{app}/policy/preview`: the policy form's fields backtested against the fleet
    /// (``RolloutPage``), written nowhere; the page shows the form again with them, ready to save.
    @Sendable func backtestPolicy(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let form = try await DashboardForm.decode(RolloutForms.Policy.self, from: request)
        let (platform, revision, reason) = try form.writeContext()
        let policy = try CatalogInput.policy(try form.body())
        let model = try await RolloutPage.model(
            request, identity: identity, app: app, platform: platform, reports: reports, now: clock.now(),
            draft: RolloutPage.PolicyDraft(policy: policy, revision: revision, reason: reason))
        return Page.framed(
            identity, title: "Rollout · \(app.app.name) · \(platform)", app: app.app.id, platform: platform,
            body: RolloutPage.view(model)
        ).response()
    }

    /// `POST /dashboard/apps/{app}/new-release/preview`: the release backtested against the fleet
    /// (``RolloutPage``), written nowhere; the page shows the form again with it, ready to add.
    @Sendable func backtestNewRelease(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let app = try await context.app(in: catalog)
        let form = try await DashboardForm.decode(RolloutForms.NewRelease.self, from: request)
        let (platform, _, _) = try form.writeContext()
        let model = try await RolloutPage.model(
            request, identity: identity, app: app, platform: platform, reports: reports, now: clock.now(), newRelease: form)
        return Page.framed(
            identity, title: "Rollout · \(app.app.name) · \(platform)", app: app.app.id, platform: platform,
            body: RolloutPage.view(model)
        ).response()
    }

    /// `POST /dashboard/apps/{app}/new-release`: adds the release as `POST …/releases` does.
    @Sendable func addNewRelease(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = try await DashboardForm.decode(RolloutForms.NewRelease.self, from: request)
        let (platform, _, reason) = try form.writeContext()
        let now = clock.now()
        let release = try CatalogInput.release(try form.body(platform: platform), now: now)
        _ = try await catalog.addRelease(appId: appId, release, actor: identity.key.actor, reason: reason, now: now)
        return await written(app: appId, platform: platform, saved: "release")
    }

    /// `POST /dashboard/apps/{app}/minimum`: the rest of the policy as it is now; the store refuses it
    /// if that is not the revision the preview showed.
    @Sendable func raiseMinimum(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = try await DashboardForm.decode(RolloutForms.Minimum.self, from: request)
        let (platform, revision, reason) = try form.writeContext()
        guard let minimum = form.minimumVersion.flatMap(Version.init) else {
            throw ProblemDetails.badRequest("minimumVersion: not a version", field: "minimumVersion")
        }
        var policy = try await context.app(in: catalog).policy(for: platform)
        policy.minimumVersion = minimum
        do throws(FieldError) { try CatalogInput.checkMinimumBelowTarget(policy) } catch { throw CatalogError.invalid(error) }
        return try await replace(appId, platform, policy, revision: revision, reason: reason, identity: identity)
    }

    /// Replaces the policy if it is still at the revision the form showed, then back to the overview.
    private func replace(
        _ appId: AppID, _ platform: Platform, _ policy: Policy, revision: Int, reason: String, identity: Identity
    ) async throws -> Response {
        _ = try await catalog.replacePolicy(
            appId: appId, platform: platform, policy, expectedRevision: revision, actor: identity.key.actor, reason: reason,
            now: clock.now())
        return await written(app: appId, platform: platform, saved: "policy")
    }

    /// `POST /dashboard/apps/{app}/releases/{version}`
    @Sendable func changeRelease(_ request: Request, context: UpshiftRequestContext) async throws -> Response {
        let identity = try context.requireIdentity()
        let appId = try context.appId()
        let form = try await DashboardForm.decode(RolloutForms.ReleaseChange.self, from: request)
        let (platform, revision, reason) = try form.writeContext()
        let version = try context.pathVersion()
        let patch = try form.patch()
        let now = clock.now()
        _ = try await catalog.updateRelease(
            appId: appId, platform: platform, version: version, expectedRevision: revision, actor: identity.key.actor,
            reason: reason, now: now
        ) { release in
            do throws(FieldError) { return try CatalogInput.releasePatch(patch, to: release, now: now) } catch {
                throw CatalogError.invalid(error)
            }
        }
        return await written(app: appId, platform: platform, saved: "release")
    }
}
