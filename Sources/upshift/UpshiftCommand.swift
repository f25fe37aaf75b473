import ArgumentParser

/// The one `upshift` executable: parsing only; the work lives in the libraries.
@main
struct UpshiftCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "upshift",
        abstract: "Upshift: update checks, upgrade events and adoption reports for apps.",
        subcommands: [
            Serve.self, Migrate.self, Apps.self, Keys.self, Releases.self, PolicyCommand.self, ProjectionsCommand.self,
            Simulate.self, Demo.self, BenchStatic.self,
        ]
    )
}
