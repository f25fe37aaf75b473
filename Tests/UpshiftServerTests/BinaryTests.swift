import Foundation
import Testing
import UpshiftStore
import UpshiftTestSupport

/// `upshift` put on PATH works from any folder: it carries its migrations and its API description.
@Suite struct BinaryTests {
    @Test func theBuiltInMigrationsAreTheFilesOfSql() throws {
        let builtIn = try Migration.embedded()
        #expect(!builtIn.isEmpty)
        #expect(builtIn == (try Migration.load(from: TestEnvironment.migrationsDirectory)))
    }

    @Test func serveRunsFromAFolderWithoutSqlAndServesItsAPIDescription() async throws {
        let harness = try await Harness.make()
        let elsewhere = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-elsewhere-\(UUID())")
        try FileManager.default.createDirectory(at: elsewhere, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: elsewhere) }
        let server = try ServerProcess(
            database: harness.database, port: try await freePort(), extraEnvironment: ["UPSHIFT_MIGRATIONS_DIR": ""],
            workingDirectory: elsewhere)
        try await server.start()
        let reply = try await Server(port: server.port).request(.GET, "/openapi.yaml")
        #expect(reply.status == 200)
        let document = try Data(contentsOf: TestEnvironment.packageRoot.appendingPathComponent("docs/openapi.yaml"))
        #expect(Data(reply.body) == document)
        #expect(await server.terminate() == 0)
    }
}
