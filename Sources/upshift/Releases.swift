import ArgumentParser
import Foundation
import Logging
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct Releases: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, list, withdraw, roll out and import releases.",
        subcommands: [Add.self, List.self, Withdraw.self, Rollout.self, Import.self])

    struct Add: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Add a release of an app on one platform.")
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …", transform: Platform.argument) var platform: Platform
        @Option(help: "The version, e.g. 2.4.0.") var version: String
        @Option(help: "When it is (or will be) out, RFC 3339; default now.") var releasedAt: String?
        @Option(help: "live or beta (default live).") var channel: String?
        @Option(help: "Lowest OS version it runs on.") var minimumOs: String?
        @Option(help: "Highest OS version it runs on.") var maximumOs: String?
        @Option(help: "A line of release notes as locale=text (repeatable), e.g. en=\"Faster sync\".") var note: [String] = []
        @Option(help: "Download URL overriding the app's store URL.") var updateUrl: String?
        @Option(help: "Share of installs it is offered to, 0–100 (default 100).") var rolloutPercent: Double?
        @Option(help: "A schedule that advances the rollout: app-store, or PERCENT@HOURS steps (10@0,50@24,100@48).")
        var schedule: String?
        @Option(help: "Build number (CFBundleVersion). On macOS the appcast sends it as sparkle:version, which Sparkle compares with the installed build; elsewhere informational.") var build: Int?
        @Option(help: "Why (recorded in the app's history).") var reason: String?

        func run() async throws {
            var body: [String: JSONValue] = [
                "platform": .string(platform.rawValue), "version": .string(version),
                "releasedAt": .string(releasedAt ?? Timestamp.format(SystemClock().now())),
            ]
            body["channel"] = channel.map(JSONValue.string)
            body["minimumOSVersion"] = minimumOs.map(JSONValue.string)
            body["maximumOSVersion"] = maximumOs.map(JSONValue.string)
            body["updateURL"] = updateUrl.map(JSONValue.string)
            body["rolloutPercent"] = rolloutPercent.map { .number(JSONNumber($0)) }
            body["build"] = build.map { .number(JSONNumber($0)) }
            if let schedule { body["rolloutSchedule"] = try Rollout.steps(schedule) }
            var notes: [String: [JSONValue]] = [:]
            for entry in note {
                let parts = entry.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { throw ValidationError("--note takes locale=text") }
                notes[String(parts[0]), default: []].append(.string(String(parts[1])))
            }
            if !notes.isEmpty { body["notes"] = .object(notes.mapValues(JSONValue.array)) }
            let now = SystemClock().now()
            let release = try CatalogCommand.validated { () throws(FieldError) in try CatalogInput.release(.object(body), now: now) }
            let (app, reason) = (app, reason)
            let write = try await CatalogCommand.run { catalog in
                try await catalog.addRelease(
                    appId: AppID.named(app), release, actor: CatalogCommand.actor, reason: reason, now: now)
            }
            print("added \(write.value.platform) \(write.value.version) to \(app) (revision \(write.revision))")
            for warning in write.warnings { print("warning: \(warning)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an app's releases, newest first.")
        @Option(help: "The app id.") var app: String
        @Option(help: "Only this platform.", transform: Platform.argument) var platform: Platform?

        func run() async throws {
            let (app, platform) = (app, platform)
            guard let catalog = try await CatalogCommand.run({ catalog in try await catalog.app(id: AppID.named(app)) }) else {
                throw CommandFailure(description: "no app \(app)")
            }
            print("platform\tversion\treleased\tchannel\tstatus\trollout\trevision")
            for name in platform.map({ [$0] }) ?? catalog.releases.keys.sorted() {
                for release in catalog.releases(for: name) {
                    var rollout = "\(release.rolloutPercent.formatted())%\(release.rolloutPaused ? " halted" : "")"
                    if let schedule = release.rolloutSchedule {
                        rollout += " (schedule \(schedule.state.rawValue), step \(schedule.step)/\(schedule.steps.count)"
                        if let next = schedule.next {
                            rollout += ", \(next.step.percent.formatted())% at \(Timestamp.format(next.at))"
                        }
                        rollout += ")"
                    }
                    print([release.platform.rawValue, release.version.text, Timestamp.format(release.releasedAt), release.channel.rawValue,
                           release.status.rawValue, rollout, String(release.revision)].joined(separator: "\t"))
                }
            }
        }
    }

    struct Withdraw: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Withdraw a release: it is offered to nobody.")
        @OptionGroup var target: ReleaseTarget
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func run() async throws {
            try await target.patch(try ReleaseAction.withdraw.patch(), reason: reason, verb: "withdrew")
        }
    }

    struct Rollout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change a release's rollout: percent, schedule, pause, resume, halt or release to everyone.",
            discussion: """
                A schedule advances by itself (the rollout worker of `upshift serve`, where the projections run):
                --schedule app-store is the App Store's phased release (1, 2, 5, 10, 20, 50, 100 % at 0, 24, …
                144 hours); a custom one is PERCENT@HOURS steps, e.g. 10@0,50@24,100@48. It starts now, or when
                the release comes out if that is later. --percent ends a schedule, as does --end-schedule.
                """)
        @OptionGroup var target: ReleaseTarget
        @Option(help: "Share of installs it is offered to, 0–100 (ends a schedule).") var percent: Double?
        @Option(help: "app-store, or PERCENT@HOURS steps separated by commas (10@0,50@24,100@48).") var schedule: String?
        @Flag(help: "End the schedule; the percentage stays.") var endSchedule = false
        @Flag(help: "Pause the schedule: the percentage stays, no step comes due (30 days of pauses at most).")
        var pauseSchedule = false
        @Flag(help: "Halt the rollout: offered to nobody until resumed; a schedule stops too.") var pause = false
        @Flag(help: "Resume a halted rollout or a paused schedule.") var resume = false
        @Flag(help: "Offer it to everyone now; a schedule ends.") var releaseToEveryone = false
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func validate() throws {
            let chosen = [percent != nil, schedule != nil, endSchedule, pauseSchedule, pause, resume, releaseToEveryone]
            guard chosen.filter({ $0 }).count == 1 else {
                throw ValidationError(
                    "give one of --percent, --schedule, --end-schedule, --pause-schedule, --pause, --resume, --release-to-everyone")
            }
            if let schedule { _ = try Self.steps(schedule) }
        }

        /// `app-store`, or `PERCENT@HOURS,…` as the API's list of steps.
        static func steps(_ text: String) throws -> JSONValue {
            if text == "app-store" { return .string(RolloutSchedule.Kind.appStore.rawValue) }
            let steps = try text.split(separator: ",").map { step -> JSONValue in
                let parts = step.split(separator: "@")
                guard parts.count == 2, let percent = JSONNumber(literal: String(parts[0])),
                    let hours = JSONNumber(literal: String(parts[1]))
                else { throw ValidationError("--schedule: \(step) is not PERCENT@HOURS") }
                return .object(["percent": .number(percent), "afterHours": .number(hours)])
            }
            return .array(steps)
        }

        func run() async throws {
            let patch: [String: JSONValue]
            if endSchedule {
                patch = ["rolloutSchedule": .null]
            } else {
                let actions: [(Bool, ReleaseAction)] = [
                    (percent != nil, .rollout), (schedule != nil, .schedule), (pauseSchedule, .pauseSchedule),
                    (pause, .halt), (resume, .resume), (releaseToEveryone, .release),
                ]
                guard let action = actions.first(where: { $0.0 })?.1 else { throw ValidationError("give one change") }
                patch = try action.patch(percent: percent.map { JSONNumber($0) }, steps: try schedule.map(Self.steps))
            }
            try await target.patch(patch, reason: reason, verb: "updated the rollout of")
        }
    }
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the App Store's current version of an app, read from Apple's lookup API.",
            discussion: """
                Asks the lookup (UPSHIFT_STORE_LOOKUP_URL, default \(AppStoreImporter.Settings.appleLookupURL)) for the
                app's bundle id on the platform. A valid version that the catalog does not hold yet is added as a
                live release with the store's date, minimum OS and notes (in the app's default locale), reason
                "\(AppStoreImport.reason)", actor "\(AppStoreImport.actor)". Exits non-zero when nothing could be read.
                """)
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, tvos or macos.", transform: Platform.argument) var platform: Platform = "ios"
        @Option(help: "The lookup URL (overrides UPSHIFT_STORE_LOOKUP_URL).") var lookupUrl: String?

        func run() async throws {
            var settings = AppStoreImporter.Settings()
            if let url = lookupUrl ?? ProcessInfo.processInfo.environment["UPSHIFT_STORE_LOOKUP_URL"].flatMap({ $0.isEmpty ? nil : $0 }) {
                do {
                    settings.lookupURL = try AppStoreImporter.Settings.lookupURL(
                        url, name: lookupUrl == nil ? "UPSHIFT_STORE_LOOKUP_URL" : "--lookup-url")
                } catch {
                    throw ValidationError("\(error)")
                }
            }
            let (app, platform, lookup) = (app, platform, settings)
            let result = try await CatalogCommand.run { catalog in
                try await AppStoreImporter(settings: lookup, catalog: catalog, clock: SystemClock(), logger: Logger(label: "upshift"))
                    .run(appId: AppID.named(app), platform: platform)
            }
            switch result {
            case .added(let release, let revision):
                print("added \(platform) \(release.version) to \(app) from the App Store (revision \(revision))")
            case .present(let version):
                print("\(platform) \(version) of \(app), the App Store's current version, is in the catalog already")
            case .notListed:
                throw CommandFailure(description: "the App Store lists no \(platform) app with \(app)'s bundle id; nothing added")
            case .refused(let reason), .failed(let reason):
                throw CommandFailure(description: "nothing added: \(reason)")
            }
        }
    }
}

/// `--app --platform --version` of one release.
struct ReleaseTarget: ParsableArguments {
    @Option(help: "The app id.") var app: String
    @Option(help: "ios, android, macos, …", transform: Platform.argument) var platform: Platform
    @Option(help: "The release's version.") var version: String

    /// Reads the release's current revision and applies `patch` against it (a stale read is refused).
    func patch(_ patch: [String: JSONValue], reason: String, verb: String) async throws {
        guard let version = Version(version) else { throw ValidationError("\(self.version) is not a valid version") }
        let (app, platform) = (app, platform)
        let body = JSONValue.object(patch)
        let write = try await CatalogCommand.run { catalog in
            // Text that is no app id names no app, so no release of it.
            guard let appId = AppID(validating: app),
                let current = try await catalog.app(id: appId)?.release(platform: platform, version: version)
            else { throw CatalogError.releaseNotFound("\(platform) \(version)") }
            let now = SystemClock().now()
            return try await catalog.updateRelease(
                appId: appId, platform: platform, version: version, expectedRevision: current.revision,
                actor: CatalogCommand.actor, reason: reason, now: now
            ) { release in
                do throws(FieldError) { return try CatalogInput.releasePatch(body, to: release, now: now) } catch {
                    throw CatalogError.invalid(error)
                }
            }
        }
        print("\(verb) \(platform) \(version) of \(app) (revision \(write.revision))")
        for warning in write.warnings { print("warning: \(warning)") }
    }
}

