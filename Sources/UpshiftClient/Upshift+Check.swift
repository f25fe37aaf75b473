import Foundation
import UpshiftWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The check, and what the user answered to a prompt: later, skip, What's New seen.
extension Upshift {
    /// Whether to show nothing, a soft prompt or a blocking screen. Asks the server when the last answer
    /// for this app version and build is older than its `checkAfterSeconds` (or with `force`, which also
    /// bypasses HTTP caches); answers within `checkTimeout` from that stored answer, or `none` without one.
    public func check(force: Bool = false) async -> UpshiftDecision {
        await ensureStorage()
        let decision = await decision(force: force)
        current = decision
        for subscriber in subscribers.values { subscriber.yield(decision) }
        return decision
    }

    private func decision(force: Bool) async -> UpshiftDecision {
        let now = configuration.clock.now()
        let stored = state.decision.flatMap {
            $0.appVersion == configuration.appVersion && $0.build == configuration.build ? $0 : nil
        }
        // A decision received "in the future" (the clock was set back) is stale.
        if !force, let stored, stored.receivedAt <= now,
            now < stored.receivedAt.addingTimeInterval(TimeInterval(stored.decision.checkAfterSeconds))
        {
            return decide(stored.decision, origin: .stored)
        }
        guard !configuration.isPreview else {
            return stored.map { decide($0.decision, origin: .stored) } ?? UpshiftDecision(action: .none, origin: .none)
        }
        let request = checkRequest(force: force)
        let transport = configuration.transport
        do {
            let (data, response) = try await withTimeout(configuration.checkTimeout) { try await transport.send(request) }
            guard response.statusCode == 200 else {
                throw CheckFailed(description: "HTTP \(response.statusCode): \(String(decoding: data.prefix(300), as: UTF8.self))")
            }
            let decision = try CatalogCoding.decoder().decode(CheckDecision.self, from: data)
            state.decision = ClientState.StoredDecision(
                appVersion: configuration.appVersion, build: configuration.build, decision: decision,
                receivedAt: configuration.clock.now())
            if state.previousVersion != nil, let whatsNew = decision.whatsNew {
                state.whatsNew = whatsNew
                state.previousVersion = nil
            }
            persistState()
            return decide(decision, origin: .server)
        } catch {
            configuration.log("check failed, answering from what is stored: \(error)")
            guard let stored else { return UpshiftDecision(action: .none, origin: .none) }
            return decide(stored.decision, origin: .stored)
        }
    }

    private func decide(_ decision: CheckDecision, origin: UpshiftDecision.Origin) -> UpshiftDecision {
        var result = UpshiftDecision(action: decision.action, origin: origin, server: decision)
        guard decision.action == .soft else { return result }  // a force ignores "later" and "skip"
        if let latest = decision.latestVersion.flatMap(Version.init), state.skippedVersions.contains(latest.normalized) {
            result.action = .none
            result.suppressedBy = .skipped
        } else if let remindAfter = state.remindAfter, configuration.clock.now() < remindAfter {
            result.action = .none
            result.suppressedBy = .remindLater
        }
        return result
    }

    private func checkRequest(force: Bool) -> URLRequest {
        let install = recording ? installIdentifier.map { $0.uuidString.lowercased() } : nil
        var query: [(String, String?)] = [
            ("platform", configuration.platform), ("version", configuration.appVersion),
            ("build", configuration.build.map(String.init)), ("os", configuration.osVersion),
            ("install", install), ("locale", configuration.locale),
            ("channel", configuration.channel.rawValue), ("previous", state.previousVersion),
        ]
        query.removeAll { $0.1 == nil }
        var components = URLComponents(
            url: configuration.baseURL.appendingPathComponent("v1/apps/\(configuration.appId)/check"),
            resolvingAgainstBaseURL: false)!
        // Every reserved character escaped (URLComponents would leave the `+` of `1.2+7` as it is).
        components.percentEncodedQuery = query.map { "\($0.0)=\(Self.escape($0.1!))" }.joined(separator: "&")
        var request = URLRequest(url: components.url!, cachePolicy: .reloadIgnoringLocalAndRemoteCacheData)
        request.timeoutInterval = Self.seconds(configuration.checkTimeout)
        if force { request.setValue("no-cache", forHTTPHeaderField: "Cache-Control") }
        return request
    }

    /// The user chose "later" on a soft prompt: no soft prompt for `remindAfterSeconds`.
    public func remindLater(_ decision: UpshiftDecision) {
        takeFiles()
        guard let server = decision.server, server.action == .soft else { return }
        state.remindAfter = configuration.clock.now().addingTimeInterval(TimeInterval(server.remindAfterSeconds ?? 86_400))
        persistState()
        if let target = server.latestVersion { record(.promptDismissed(kind: .soft, targetVersion: target, action: .later)) }
    }

    /// The user chose to skip this version (when the decision allows it): no soft prompt for it again.
    public func skip(_ decision: UpshiftDecision) {
        takeFiles()
        guard let server = decision.server, server.action == .soft, server.allowSkip != false,
            let target = server.latestVersion, let version = Version(target)
        else { return }
        state.skippedVersions.insert(version.normalized)
        persistState()
        record(.promptDismissed(kind: .soft, targetVersion: target, action: .skip))
    }

    /// What's New was shown: it is not offered again, and `whats_new_shown` is recorded.
    public func whatsNewShown() {
        takeFiles()
        guard state.whatsNew != nil else { return }
        state.whatsNew = nil
        persistState()
        record(.whatsNewShown)
    }
}
