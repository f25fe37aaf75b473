import Foundation

/// The check decision (docs/ARCHITECTURE.md, "The decision rules"), as a pure function of the catalog, the
/// request and `now`. Step numbers in comments refer to that section's list.
public enum DecisionEngine {
    public static func decide(_ request: CheckRequest, catalog: AppCatalog, now: Date) -> CheckDecision {
        let policy = catalog.policy(for: request.platform)
        let installed = request.version
        var decision = CheckDecision(
            action: .none, reason: .upToDate, installedVersion: installed.text,
            checkAfterSeconds: policy.checkIntervalSeconds)
        decision.minimumVersion = policy.minimumVersion?.text
        let all = catalog.releases(for: request.platform)  // newest first
        if let previous = request.previous {
            decision.whatsNew = all
                .filter { $0.status == .live && $0.version > previous && $0.version <= installed }
                .map { notes($0, request, catalog) }
        }

        // 1. Kill switch.
        guard policy.enabled else {
            decision.reason = .disabled
            return decision
        }

        // 2.–4. Candidates, compatible, eligible, offerable (all newest first).
        let candidates = all.filter { release in
            release.status == .live && release.releasedAt <= now
                && (request.channel == .beta || release.channel == .live) && release.version > installed
        }
        let compatible = candidates.filter { isCompatible($0, os: request.os) }
        let eligible = compatible.filter { Rollout.admits($0, appId: catalog.app.id, installId: request.install) }
        let offerable = eligible.filter { !policy.isBlocked($0.version) }
        let unblockedCompatible = compatible.filter { !policy.isBlocked($0.version) }
        let unblockedIncompatible = candidates.filter { !policy.isBlocked($0.version) && !isCompatible($0, os: request.os) }

        // 5. The newest release the OS cannot run, when it is newer than anything it can.
        if let newest = unblockedIncompatible.first,
            unblockedCompatible.first.map({ newest.version > $0.version }) ?? true
        {
            decision.unsupported = Unsupported(
                latestVersion: newest.version.text, minimumOSVersion: newest.minimumOSVersion?.text,
                maximumOSVersion: newest.maximumOSVersion?.text)
        }

        // 6. Force, by the first reason that holds and that a compatible release satisfies.
        var unreachableForce = false
        for (reason, satisfies) in forceReasons(policy: policy, installed: installed, offerable: offerable, now: now) {
            let target = offerable.first(where: satisfies) ?? unblockedCompatible.first(where: satisfies)
            if let target {
                fill(&decision, action: .force, reason: reason, target: target, request, catalog, compatible, eligible, now: now)
                decision.allowSkip = false
                return decision
            }
            if unblockedIncompatible.contains(where: satisfies) { unreachableForce = true }
        }

        // 7. Soft.
        let soft = softDecision(&decision, policy: policy, request, catalog, offerable: offerable,
                                compatible: compatible, eligible: eligible, unblockedCompatible: unblockedCompatible,
                                unblockedIncompatible: unblockedIncompatible, now: now)
        if !soft, unreachableForce {
            decision.reason = .osUnsupported
        }
        return decision
    }

    /// The force reasons that hold, in order, each with the test a release must pass to satisfy it.
    private static func forceReasons(policy: Policy, installed: Version, offerable: [Release], now: Date)
        -> [(CheckReason, (Release) -> Bool)]
    {
        var reasons: [(CheckReason, (Release) -> Bool)] = []
        if let minimum = policy.minimumVersion, installed < minimum {
            reasons.append((.belowMinimum, { $0.version >= minimum }))
        }
        if policy.isBlocked(installed) {
            reasons.append((.blockedVersion, { _ in true }))
        }
        // An install is only overdue for a release it was offered.
        if let days = policy.blockAfterDays,
            offerable.contains(where: { now.timeIntervalSince($0.releasedAt) >= days * 86_400 })
        {
            reasons.append((.releaseOverdue, { _ in true }))
        }
        return reasons
    }

    /// Step 7; returns whether the answer is a soft prompt.
    private static func softDecision(
        _ decision: inout CheckDecision, policy: Policy, _ request: CheckRequest, _ catalog: AppCatalog,
        offerable: [Release], compatible: [Release], eligible: [Release], unblockedCompatible: [Release],
        unblockedIncompatible: [Release], now: Date
    ) -> Bool {
        guard !offerable.isEmpty else {
            if !unblockedCompatible.isEmpty {
                decision.reason = .notInRollout
            } else if !unblockedIncompatible.isEmpty {
                decision.reason = .osUnsupported
            } else {
                decision.reason = .upToDate  // 8.
            }
            return false
        }
        let oldEnough = offerable.first { release in
            policy.notifyAfterDays.map { now.timeIntervalSince(release.releasedAt) >= $0 * 86_400 } ?? true
        }
        guard let offered = oldEnough else {
            decision.reason = .tooRecent
            return false
        }
        if let target = policy.targetVersion, request.version >= target {
            decision.reason = .upToDate
            return false
        }
        let behind = eligible.count { $0.version > request.version && $0.version <= offered.version }
        guard behind >= policy.versionsBehindThreshold else {
            decision.reason = .notEnoughVersionsBehind
            decision.versionsBehind = behind
            return false
        }
        fill(&decision, action: .soft, reason: .updateAvailable, target: offered, request, catalog, compatible, eligible, now: now)
        decision.allowSkip = policy.allowSkip
        decision.remindAfterSeconds = policy.remindIntervalSeconds
        return true
    }

    private static func fill(
        _ decision: inout CheckDecision, action: CheckAction, reason: CheckReason, target: Release,
        _ request: CheckRequest, _ catalog: AppCatalog, _ compatible: [Release], _ eligible: [Release], now: Date
    ) {
        decision.action = action
        decision.reason = reason
        decision.latestVersion = target.version.text
        decision.releasedAt = target.releasedAt
        decision.updateURL = target.updateURL ?? catalog.app.updateURL[request.platform]
        decision.updateType = Version.updateType(from: request.version, to: target.version)
        decision.versionsBehind = eligible.count { $0.version <= target.version }
        let offered = compatible.filter { $0.version <= target.version }
        decision.releaseNotes = offered.map { notes($0, request, catalog) }
        decision.priority = action == .force ? 5 : offered.map { $0.priority ?? 0 }.max() ?? 0
        decision.stalenessDays = request.install.map { install in
            Staleness(target, policy: catalog.policy(for: request.platform), appId: catalog.app.id)
                .days(installId: install, now: now)
        }
    }

    private static func notes(_ release: Release, _ request: CheckRequest, _ catalog: AppCatalog) -> VersionNotes {
        VersionNotes(
            version: release.version.text,
            notes: LocaleTag.notes(release.notes, locale: request.locale, defaultLocale: catalog.app.defaultLocale))
    }

    /// `minimumOSVersion ≤ os ≤ maximumOSVersion`; without `os`, every release is compatible.
    public static func isCompatible(_ release: Release, os: Version?) -> Bool {
        guard let os else { return true }
        if let minimum = release.minimumOSVersion, os < minimum { return false }
        if let maximum = release.maximumOSVersion, os > maximum { return false }
        return true
    }
}

extension DecisionEngine {
    /// The instants at which a decision for `platform` can change while the catalog stays the same:
    /// each release's `releasedAt`, and that plus `notifyAfterDays` and `blockAfterDays`. Between two
    /// of them every decision is constant in `now`, which is what lets the server reuse an answer.
    public static func timeBoundaries(_ catalog: AppCatalog, platform: Platform) -> [Date] {
        let policy = catalog.policy(for: platform)
        var instants: Set<Date> = []
        for release in catalog.releases(for: platform) {
            instants.insert(release.releasedAt)
            if let days = policy.notifyAfterDays { instants.insert(release.releasedAt.addingTimeInterval(days * 86_400)) }
            if let days = policy.blockAfterDays { instants.insert(release.releasedAt.addingTimeInterval(days * 86_400)) }
        }
        return instants.sorted()
    }

    /// Whether the install id can change a decision on `platform`: only a rollout strictly between 0
    /// and 100% (and not paused) admits some installs and not others.
    public static func dependsOnInstall(_ catalog: AppCatalog, platform: Platform) -> Bool {
        catalog.releases(for: platform).contains { !$0.rolloutPaused && $0.rolloutPercent > 0 && $0.rolloutPercent < 100 }
    }
}
