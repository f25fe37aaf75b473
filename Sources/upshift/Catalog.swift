import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct Releases: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Add, list, withdraw and roll out releases.", subcommands: [Add.self, List.self, Withdraw.self, Rollout.self])

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
    }
}

struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy", abstract: "Show and change the update policy of an app on a platform.",
        subcommands: [Show.self, Set.self])

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the policy as JSON with its revision.")
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …") var platform: String

        func run() async throws {
            let (app, platform) = (app, platform)
            guard let catalog = try await CatalogCommand.run({ catalog in try await catalog.app(id: app) }) else {
                throw CommandFailure(description: "no app \(app)")
            }
            let encoder = CatalogCoding.encoder()
            encoder.outputFormatting = [.sortedKeys, .prettyPrinted]
            print(String(decoding: try encoder.encode(catalog.policy(for: platform)), as: UTF8.self))
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change policy fields; the others keep their values.",
            discussion: "Example: upshift policy set --app demo --platform ios --minimum 2.4.0 --reason \"crash in 2.3.x\"")
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …") var platform: String
        @Option(help: "true or false: the kill switch.") var enabled: Bool?
        @Option(help: "Installs below it are forced to update.") var minimum: String?
        @Flag(help: "Remove the minimum version.") var clearMinimum = false
        @Option(help: "Installs at or above it are not prompted.") var target: String?
        @Flag(help: "Remove the target version.") var clearTarget = false
        @Option(help: "Block a version (repeatable): its installs are forced off it.") var block: [String] = []
        @Option(help: "Unblock a version (repeatable).") var unblock: [String] = []
        @Option(help: "Days after release before a soft prompt (X).") var notifyAfterDays: Double?
        @Option(help: "Days after release before an offered release is forced (Y).") var blockAfterDays: Double?
        @Option(help: "Versions behind before a soft prompt (Z).") var versionsBehind: Int?
        @Option(help: "Seconds before a dismissed prompt returns.") var remindInterval: Int?
        @Option(help: "Seconds between checks.") var checkInterval: Int?
        @Option(help: "true or false: whether soft prompts offer \"skip this version\".") var allowSkip: Bool?
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func run() async throws {
            let options = self
            let write = try await CatalogCommand.run { catalog in
                guard let current = try await catalog.app(id: options.app) else { throw CatalogError.appNotFound(options.app) }
                let old = current.policy(for: options.platform)
                let body = try options.merged(into: old)
                let policy: Policy
                do throws(FieldError) { policy = try CatalogInput.policy(body) } catch { throw CatalogError.invalid(error) }
                return try await catalog.replacePolicy(
                    appId: options.app, platform: options.platform, policy, expectedRevision: old.revision,
                    actor: CatalogCommand.actor, reason: options.reason, now: SystemClock().now())
            }
            print("policy of \(app) on \(platform) is now at revision \(write.revision)")
            for warning in write.warnings { print("warning: \(warning)") }
        }

        /// The current policy with the given options applied, as an API body.
        func merged(into policy: Policy) throws -> JSONValue {
            guard var body = try JSONValue.parse(CatalogCoding.encoder().encode(policy)).objectValue else { return .null }
            body["revision"] = nil
            if let enabled { body["enabled"] = .bool(enabled) }
            if let minimum { body["minimumVersion"] = .string(minimum) }
            if clearMinimum { body["minimumVersion"] = nil }
            if let target { body["targetVersion"] = .string(target) }
            if clearTarget { body["targetVersion"] = nil }
            var blocked = policy.blockedVersions.map(\.text)
            for version in block where !blocked.contains(where: { Version($0) == Version(version) }) {
                blocked.append(version)
            }
            blocked.removeAll { text in unblock.contains { Version($0) != nil && Version($0) == Version(text) } }
            body["blockedVersions"] = .array(blocked.map(JSONValue.string))
            if let notifyAfterDays { body["notifyAfterDays"] = .number(JSONNumber(notifyAfterDays)) }
            if let blockAfterDays { body["blockAfterDays"] = .number(JSONNumber(blockAfterDays)) }
            if let versionsBehind { body["versionsBehindThreshold"] = .number(JSONNumber(versionsBehind)) }
            if let remindInterval { body["remindIntervalSeconds"] = .number(JSONNumber(remindInterval)) }
            if let checkInterval { body["checkIntervalSeconds"] = .number(JSONNumber(checkInterval)) }
            if let allowSkip { body["allowSkip"] = .bool(allowSkip) }
            return .object(body)
        }
    }
}
