import ArgumentParser

/// The one `upshift` executable: parsing only; the work lives in the libraries.
@main
struct UpshiftCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upshift",
        abstract: "Upshift: update checks, upgrade events and adoption reports for apps.",
        version: UpshiftCommand.version,
        subcommands: [
            Serve.self, Migrate.self, Apps.self, Keys.self, Releases.self, PolicyCommand.self, RulesCommand.self, ProjectionsCommand.self,
            LogCommand.self, InstallsCommand.self, WebhooksCommand.self,
            Simulate.self, Demo.self, BenchStatic.self,
        ]
    )

    /// What `upshift --version` prints: the version of this checkout (the repository has no release tags yet).
    static let version = "0.1.0"
}
