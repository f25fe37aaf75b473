import Foundation
import PackagePlugin

/// Compiles files of the repository into a target, so that `upshift` works from any folder and in the
/// container image without them on disk: the migrations of `sql/` into UpshiftStore, `docs/openapi.yaml`
/// into UpshiftServer.
@main
struct EmbedFiles: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let root = context.package.directoryURL
        let files: [URL]
        switch target.name {
        case "UpshiftStore":
            let sql = root.appending(path: "sql")
            files = try FileManager.default.contentsOfDirectory(at: sql, includingPropertiesForKeys: nil)
                .filter { $0.pathExtension == "sql" }
                .sorted { $0.lastPathComponent < $1.lastPathComponent }
        case "UpshiftServer":
            files = [root.appending(path: "docs/openapi.yaml")]
        default:
            return []
        }
        let output = context.pluginWorkDirectoryURL.appending(path: "EmbeddedFiles.swift")
        let script = root.appending(path: "scripts/embed-files")
        return [
            .buildCommand(
                displayName: "Embedding \(files.count) files into \(target.name)",
                executable: URL(fileURLWithPath: "/bin/sh"),
                arguments: [script.path, output.path] + files.map(\.path),
                inputFiles: [script] + files,
                outputFiles: [output])
        ]
    }
}
