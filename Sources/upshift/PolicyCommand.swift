import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct PolicyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "policy", abstract: "Show and change the update policy of an app on a platform.",
        subcommands: [Show.self, Set.self])

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the policy as JSON with its revision.")
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …", transform: Platform.argument) var platform: Platform

        func run() async throws {
            let (app, platform) = (app, platform)
            guard let catalog = try await CatalogCommand.run({ catalog in try await catalog.app(id: AppID.named(app)) }) else {
                throw CommandFailure(description: "no app \(app)")
            }
            print(String(decoding: try CatalogCommand.prettyEncoder().encode(catalog.policy(for: platform)), as: UTF8.self))
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Change policy fields; the others keep their values.",
            discussion: "Example: upshift policy set --app demo --platform ios --minimum 2.4.0 --reason \"crash in 2.3.x\"")
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …", transform: Platform.argument) var platform: Platform
        @Option(help: "true or false: the kill switch.") var enabled: Bool?
        @Option(help: "Installs below it are forced to update.") var minimum: String?
        @Flag(help: "Remove the minimum version.") var clearMinimum = false
        @Option(help: "Installs at or above it are not prompted.") var target: String?
        @Flag(help: "Remove the target version.") var clearTarget = false
        @Option(help: "Block a version (repeatable): its installs are forced off it.") var block: [String] = []
        @Option(help: "Unblock a version (repeatable).") var unblock: [String] = []
        @Option(help: "Days after a release comes out before installs are prompted to update to it.") var notifyAfterDays: Double?
        @Option(help: "Days after a release comes out before installs below it are forced to update.") var blockAfterDays: Double?
        @Option(help: "How many newer releases an install must lack before it is prompted (default 1).") var versionsBehind: Int?
        @Option(help: "Seconds before a dismissed prompt returns.") var remindInterval: Int?
        @Option(help: "Seconds between checks.") var checkInterval: Int?
        @Option(help: "true or false: whether soft prompts offer \"skip this version\".") var allowSkip: Bool?
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func run() async throws {
            let options = self
            let write = try await CatalogCommand.run { catalog in
                let app = try AppID.named(options.app)
                guard let current = try await catalog.app(id: app) else { throw CatalogError.appNotFound(options.app) }
                let old = current.policy(for: options.platform)
                let body = try options.merged(into: old)
                let policy: Policy
                do throws(FieldError) { policy = try CatalogInput.policy(body) } catch { throw CatalogError.invalid(error) }
                return try await catalog.replacePolicy(
                    appId: app, platform: options.platform, policy, expectedRevision: old.revision,
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
