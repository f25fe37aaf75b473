import ArgumentParser
import Foundation
import UpshiftCore
import UpshiftServer
import UpshiftStore

struct RulesCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "rules",
        abstract: "List, write and remove the rules that halt, advance and raise releases by themselves.",
        discussion: """
            Kinds and fields: docs/OPERATIONS.md, "Rules". A new rule is a dry run: it records what it would do
            (upshift rules records) until its state is live.
            """,
        subcommands: [List.self, Set.self, Remove.self, Records.self])

    struct Target: ParsableArguments {
        @Option(help: "The app id.") var app: String
        @Option(help: "ios, android, macos, …", transform: Platform.argument) var platform: Platform
        @Option(help: "The rule id: lower-case letters, digits and '-', at most 63.") var id: String

        func validate() throws {
            guard RuleDefinition.isID(id) else { throw ValidationError("--id: '\(id)' is not a rule id (^[a-z0-9][a-z0-9-]{0,62}$)") }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the app's rules as JSON, each with its revision.")
        @Option(help: "The app id.") var app: String

        func run() async throws {
            let app = app
            guard let catalog = try await CatalogCommand.run({ catalog in try await catalog.app(id: AppID.named(app)) }) else {
                throw CommandFailure(description: "no app \(app)")
            }
            let rules = catalog.rules.keys.sorted().flatMap(catalog.rules(for:))
            print(String(decoding: try CatalogCommand.prettyEncoder().encode(rules), as: UTF8.self))
        }
    }

    struct Set: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create or change a rule.",
            discussion: """
                Example: upshift rules set --app demo --platform ios --id crash-guard \\
                  --definition '{"kind":"halt_on_health","mode":"guarded"}' --reason "guard 2.x"
                Then: upshift rules set --app demo --platform ios --id crash-guard --state live --reason "trusted"
                """)
        @OptionGroup var target: Target
        @Option(help: "The rule as JSON (kind and its fields); required for a new rule, else the current one's.")
        var definition: String?
        @Option(help: "off, dry-run or live (default: the definition's, else dry-run).") var state: String?
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func run() async throws {
            let options = self
            let write = try await CatalogCommand.run { catalog in
                let app = try AppID.named(options.target.app)
                guard let current = try await catalog.app(id: app) else { throw CatalogError.appNotFound(options.target.app) }
                let old = current.rules(for: options.target.platform).first { $0.id == options.target.id }
                let definition = try options.definition(over: old?.definition)
                return try await catalog.replaceRule(
                    appId: app, platform: options.target.platform, id: options.target.id, definition,
                    expectedRevision: old?.revision ?? 0, actor: CatalogCommand.actor, reason: options.reason,
                    now: SystemClock().now())
            }
            print("rule \(target.id) of \(target.app) on \(target.platform) is now at revision \(write.revision)")
        }

        /// The definition given (or the current one), with `--state` applied; a failure names the field.
        func definition(over current: RuleDefinition?) throws -> RuleDefinition {
            var object: [String: JSONValue]
            if let definition {
                do {
                    guard let parsed = try JSONValue.parse(Data(definition.utf8)).objectValue else {
                        throw CommandFailure(description: "--definition must be a JSON object")
                    }
                    object = parsed
                } catch let error as JSONParseError {
                    throw CommandFailure(description: "--definition is not JSON: \(error)")
                }
            } else if let current {
                object = current.json
            } else {
                throw CommandFailure(description: "--definition is required for a new rule")
            }
            if let state { object["state"] = .string(state) }
            return try CatalogCommand.validated { () throws(FieldError) in try RuleDefinition(json: .object(object)) }
        }
    }

    struct Remove: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Remove a rule (recorded in the app's history).")
        @OptionGroup var target: Target
        @Option(help: "Why (recorded in the app's history).") var reason: String

        func run() async throws {
            let options = self
            try await CatalogCommand.run { catalog in
                let app = try AppID.named(options.target.app)
                guard let current = try await catalog.app(id: app) else { throw CatalogError.appNotFound(options.target.app) }
                guard let old = current.rules(for: options.target.platform).first(where: { $0.id == options.target.id }) else {
                    throw CatalogError.ruleNotFound("\(options.target.platform) \(options.target.id)")
                }
                try await catalog.removeRule(
                    appId: app, platform: options.target.platform, id: options.target.id, expectedRevision: old.revision,
                    actor: CatalogCommand.actor, reason: options.reason, now: SystemClock().now())
            }
            print("rule \(target.id) of \(target.app) on \(target.platform) removed")
        }
    }

    struct Records: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Print what a rule did, would have done (a dry run) or skipped, newest first.")
        @OptionGroup var target: Target
        @Option(help: "At most this many (1–500).") var limit = 50

        func validate() throws {
            guard (1...500).contains(limit) else { throw ValidationError("--limit must be from 1 to 500") }
        }

        func run() async throws {
            let (target, limit) = (target, limit)
            let app: AppID
            do { app = try AppID.named(target.app) } catch { throw CommandFailure(description: error.description) }
            let records = try await withDatabase { pool, logger in
                try await RuleRecordStore(pool: pool, logger: logger).records(
                    appId: app, platform: target.platform, ruleId: target.id, limit: limit)
            }
            for record in records {
                let subject = [record.version, record.action].compactMap { $0 }.joined(separator: " ")
                print("\(Timestamp.format(record.at))  \(record.outcome.rawValue)  \(subject.isEmpty ? "-" : subject)  \(record.summary)")
            }
        }
    }
}
