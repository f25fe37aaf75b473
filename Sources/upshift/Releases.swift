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
        @Option(help: "ios, android, macos, …") var platform: String
        @Option(help: "The version, e.g. 2.4.0.") var version: String
        @Option(help: "When it is (or will be) out, RFC 3339; default now.") var releasedAt: String?
        @Option(help: "live or beta (default live).") var channel: String?
        @Option(help: "Lowest OS version it runs on.") var minimumOs: String?
        @Option(help: "Highest OS version it runs on.") var maximumOs: String?
        @Option(help: "A line of release notes as locale=text (repeatable), e.g. en=\"Faster sync\".") var note: [String] = []
        @Option(help: "Download URL overriding the app's store URL.") var updateUrl: String?
        @Option(help: "Share of installs it is offered to, 0–100 (default 100).") var rolloutPercent: Double?
        @Option(help: "Build number (informational).") var build: Int?
        @Option(help: "Why (recorded in the app's history).") var reason: String?

        func run() async throws {
            var body: [String: JSONValue] = [
                "platform": .string(platform), "version": .string(version),
                "releasedAt": .string(releasedAt ?? Timestamp.format(SystemClock().now())),
            ]
            body["channel"] = channel.map(JSONValue.string)
            body["minimumOSVersion"] = minimumOs.map(JSONValue.string)
            body["maximumOSVersion"] = maximumOs.map(JSONValue.string)
            body["updateURL"] = updateUrl.map(JSONValue.string)
            body["rolloutPercent"] = rolloutPercent.map { .number(JSONNumber($0)) }
            body["build"] = build.map { .number(JSONNumber($0)) }
            var notes: [String: [JSONValue]] = [:]
            for entry in note {
                let parts = entry.split(separator: "=", maxSplits: 1)
                guard parts.count == 2 else { throw ValidationError("--note takes locale=text") }
                notes[String(parts[0]), default: []].append(.string(String(parts[1])))
            }
            if !notes.isEmpty { body["notes"] = .object(notes.mapValues(JSONValue.array)) }
            let release = try CatalogCommand.validated { () throws(FieldError) in try CatalogInput.release(.object(body)) }
            let (app, reason) = (app, reason)
            let write = try await CatalogCommand.run { catalog in
                try await catalog.addRelease(appId: app, release, actor: CatalogCommand.actor, reason: reason, now: SystemClock().now())
            }
            print("added \(write.value.platform) \(write.value.version) to \(app) (revision \(write.revision))")
            for warning in write.warnings { print("warning: \(warning)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List an app's releases, newest first.")
        @Option(help: "The app id.") var app: String
        @Option(help: "Only this platform.") var platform: String?

        func run() async throws {
            let (app, platform) = (app, platform)
            guard let catalog = try await CatalogCommand.run({ catalog in try await catalog.app(id: app) }) else {
                throw CommandFailure(description: "no app \(app)")
            }
            print("platform\tversion\treleased\tchannel\tstatus\trollout\trevision")
            for name in platform.map({ [$0] }) ?? catalog.releases.keys.sorted() {
                for release in catalog.releases(for: name) {
                    let rollout = "\(release.rolloutPercent.formatted())%\(release.rolloutPaused ? " paused" : "")"
                    print([release.platform, release.version.text, Timestamp.format(release.releasedAt), release.channel.rawValue,
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
            try await target.patch(["status": .string("withdrawn")], reason: reason, verb: "withdrew")
        }
    }

    struct Rollout: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Change a release's rollout: percent, pause or resume.")
        @OptionGroup var target: ReleaseTarget
        @Option(help: "Share of installs it is offered to, 0–100.") var percent: Double?
        @Flag(help: "Halt the rollout (offered to nobody until resumed).") var pause = false
        @Flag(help: "Resume a halted rollout.") var resume = false
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func validate() throws {
            if pause && resume { throw ValidationError("--pause or --resume, not both") }
            if percent == nil && !pause && !resume { throw ValidationError("give --percent, --pause or --resume") }
        }

        func run() async throws {
            var patch: [String: JSONValue] = [:]
            patch["rolloutPercent"] = percent.map { .number(JSONNumber($0)) }
            if pause { patch["rolloutPaused"] = .bool(true) }
            if resume { patch["rolloutPaused"] = .bool(false) }
            try await target.patch(patch, reason: reason, verb: "updated the rollout of")
        }
    }
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Add the App Store's current version of an app, read from Apple's lookup API.",
            discussion: """
                Asks the lookup (UPSHIFT_STORE_LOOKUP_URL, default \(StoreImporter.Settings.appleLookupURL)) for the
                app's bundle id on the platform. A valid version that the catalog does not hold yet is added as a
                live release with the store's date, minimum OS and notes (in the app's default locale), reason
                "\(StoreImport.reason)", actor "\(StoreImport.actor)". Exits non-zero when nothing could be read.
                """)
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, tvos or macos.") var platform: String = "ios"
        @Option(help: "The lookup URL (overrides UPSHIFT_STORE_LOOKUP_URL).") var lookupUrl: String?

        func run() async throws {
            var settings = StoreImporter.Settings()
            if let url = lookupUrl ?? ProcessInfo.processInfo.environment["UPSHIFT_STORE_LOOKUP_URL"].flatMap({ $0.isEmpty ? nil : $0 }) {
                do {
                    settings.lookupURL = try StoreImporter.Settings.lookupURL(
                        url, name: lookupUrl == nil ? "UPSHIFT_STORE_LOOKUP_URL" : "--lookup-url")
                } catch {
                    throw ValidationError("\(error)")
                }
            }
            let (app, platform, lookup) = (app, platform, settings)
            let result = try await CatalogCommand.run { catalog in
                try await StoreImporter(settings: lookup, catalog: catalog, clock: SystemClock(), logger: Logger(label: "upshift"))
                    .run(appId: app, platform: platform)
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
    @Option(help: "ios, android, macos, …") var platform: String
    @Option(help: "The release's version.") var version: String

    /// Reads the release's current revision and applies `patch` against it (a stale read is refused).
    func patch(_ patch: [String: JSONValue], reason: String, verb: String) async throws {
        guard let version = Version(version) else { throw ValidationError("\(self.version) is not a valid version") }
        let (app, platform) = (app, platform)
        let body = JSONValue.object(patch)
        let write = try await CatalogCommand.run { catalog in
            guard let current = try await catalog.app(id: app)?.release(platform: platform, version: version) else {
                throw CatalogError.releaseNotFound("\(platform) \(version)")
            }
            return try await catalog.updateRelease(
                appId: app, platform: platform, version: version, expectedRevision: current.revision,
                actor: CatalogCommand.actor, reason: reason, now: SystemClock().now()
            ) { release in
                do throws(FieldError) { return try CatalogInput.releasePatch(body, to: release) } catch {
                    throw CatalogError.invalid(error)
                }
            }
        }
        print("\(verb) \(platform) \(version) of \(app) (revision \(write.revision))")
        for warning in write.warnings { print("warning: \(warning)") }
    }
}

