import Foundation
import Testing
import UpshiftServer
import UpshiftTestSupport

/// docs/openapi.yaml says exactly what the server answers: its paths and methods are the router's
/// (outside the dashboard, which has pages, not an API), both ways, and the server serves the file.
@Suite(.serverTimeLimit) struct OpenAPITests {
    static let specFile = TestEnvironment.packageRoot.appendingPathComponent("docs/openapi.yaml")

    /// `METHOD /path/{param}` for every operation of the spec.
    static func specOperations() throws -> Set<String> {
        let text = try String(contentsOf: specFile, encoding: .utf8)
        var operations = Set<String>()
        var inPaths = false
        var path: String?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line == "paths:" { inPaths = true; continue }
            if inPaths, let first = line.first, first != " " { break }  // the next top-level key
            if let match = line.wholeMatch(of: #/ {2}(/[^ ]*):/#) { path = String(match.1) }
            if let path, let match = line.wholeMatch(of: #/ {4}(get|put|post|delete|options|head|patch|trace):/#) {
                operations.insert("\(match.1.uppercased()) \(path)")
            }
        }
        return operations
    }

    @Test func theSpecAndTheRouterHaveTheSameOperations() async throws {
        let harness = try await Harness.make()
        let parts = try ApplicationParts(harness.configuration())
        let routes = Set(
            parts.routes.map { route in
                let path = route.path.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
                return "\(route.method.rawValue) /" + path.joined(separator: "/")
            }
            .filter { !$0.contains(" /dashboard") })
        let spec = try Self.specOperations()
        #expect(spec.count > 15)
        #expect(routes.subtracting(spec).isEmpty, "routes the spec does not describe: \(routes.subtracting(spec).sorted())")
        #expect(spec.subtracting(routes).isEmpty, "operations the server does not answer: \(spec.subtracting(routes).sorted())")
    }

    /// The spec is served to API clients: it states its rules itself, and cites no document they never see.
    @Test func theSpecCitesNoInternalDocument() throws {
        let text = try String(contentsOf: Self.specFile, encoding: .utf8)
        #expect(!text.contains("DESIGN.md"))
    }

    @Test func theServerServesItsSpec() async throws {
        let harness = try await Harness.make()
        try await harness.run { server in
            let reply = try await server.request(.GET, "/openapi.yaml")
            #expect(reply.status == 200)
            #expect(reply.headers["Content-Type"].first?.hasPrefix("application/yaml") == true)
            #expect(reply.body == (try Data(contentsOf: Self.specFile)))
        }
    }
}
