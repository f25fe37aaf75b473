import Foundation
import UpshiftWire

/// `launch`: an update detected, the baseline of an install without SDK state, the migration steps due.
extension Upshift {
    /// Call once per launch, early, in an app without migration steps: detects the first launch of a new
    /// version (records `updated` and asks for What's New on the next check) and starts sending events.
    /// Returns the version the app was updated from, if it was.
    @discardableResult
    public func launch() async -> String? {
        await launch(migrations: [], baseline: .freshInstall).updatedFrom
    }

    /// Call once per launch, early: detects an update, runs the migration steps due and starts sending.
    /// `baseline` says what an install without SDK state is; the first release that ships the SDK meets
    /// every existing user so (see docs/SDK.md, "Your first release with the SDK").
    @discardableResult
    public func launch(migrations: [MigrationStep], baseline: Baseline) async -> LaunchReport {
        foregroundSession += 1
        startSending()
        await ensureStorage()
        guard storageReady else {
            pendingLaunch = (migrations, baseline)
            var report = LaunchReport()
            report.storageUnavailable = true
            lastLaunch = report
            return report
        }
        let report = await performLaunch(migrations, baseline: baseline)
        lastLaunch = report
        return report
    }

    func performLaunch(_ migrations: [MigrationStep], baseline: Baseline) async -> LaunchReport {
        var report = LaunchReport()
        let current = configuration.appVersion
        if history == .known, let last = state.launchedVersion, last != current, Version(last) != Version(current) {
            report.updatedFrom = last
        }
        if state.migratedThrough == nil {
            // No SDK state, an unreadable one, or a data version that was unknown before: the baseline says.
            switch await Self.resolve(baseline) {
            case .freshInstall? where history == .none:
                state.migratedThrough = current
            case .existingData(let version)?:
                state.migratedThrough = version
                if history == .none, version != current, Version(version) != Version(current) {
                    report.updatedFrom = version
                }
            default:
                break
            }
        }
        if let from = report.updatedFrom {
            state.previousVersion = from
            state.whatsNew = nil
            record(.updated(fromVersion: from), id: UUIDv5.make("updated|\(installIdentifier?.uuidString ?? "")|\(from)|\(current)"))
        }
        state.launchedVersion = current
        state.launchedBuild = configuration.build
        history = .known
        persistState()
        await migrate(migrations, report: &report)
        return report
    }

    private static func resolve(_ baseline: Baseline) async -> Baseline? {
        var next: Baseline? = baseline
        for _ in 0..<4 {
            guard case .inspect(let inspect) = next else { return next }
            next = await inspect()
        }
        return nil
    }

    private func migrate(_ steps: [MigrationStep], report: inout LaunchReport) async {
        guard let current = Version(configuration.appVersion) else { return }
        guard let done = state.migratedThrough.flatMap(Version.init) else {
            report.dataVersionUnknown = true
            if !steps.isEmpty { configuration.log("the data's version is unknown: no migration step runs") }
            return
        }
        report.stepInterrupted = state.stepUnderWay?.version
        for step in steps.sorted(by: { $0.version < $1.version }) where step.version <= current && step.version > done {
            let name = step.version.text
            // Attempts count for this app version and build: an update (a fix of the step) tries it again.
            let marker = state.stepUnderWay
            let sameApp = marker?.appVersion == configuration.appVersion && marker?.build == configuration.build
            let attempts = marker?.version == name && sameApp ? marker?.attempts ?? 0 : 0
            guard attempts < Self.stepAttempts else {
                report.stepAbandoned = name
                configuration.log("migration to \(name) was interrupted \(attempts) times: not started again by this build")
                return
            }
            // The marker goes to disk before the step runs: a crash in it is seen at the next launch.
            state.stepUnderWay = ClientState.StepUnderWay(
                version: name, attempts: attempts + 1, appVersion: configuration.appVersion, build: configuration.build)
            persistState()
            do {
                try await step.run()
            } catch {
                state.stepUnderWay = nil
                persistState()
                report.stepFailed = name
                report.stepError = "\(error)"
                configuration.log("migration to \(name) failed, retried next launch: \(error)")
                return
            }
            state.migratedThrough = name
            state.stepUnderWay = nil
            persistState()
            report.stepsRun.append(name)
        }
    }
}
