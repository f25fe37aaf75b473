import Foundation
import Testing
import UpshiftServer
import UpshiftTestSupport

/// docs/ARCHITECTURE.md maps every route, page, rule and metric to the file that holds it: its route
/// table is the router's, both ways, and every file it names exists.
@Suite(.serverTimeLimit) struct ArchitectureTests {
    static let document = TestEnvironment.packageRoot.appendingPathComponent("docs/ARCHITECTURE.md")

    /// `METHOD /path/{param}` → file, from the rows `| `GET` | `/path` | access | `file` |`.
    static func routeTable() throws -> [String: String] {
        let text = try String(contentsOf: document, encoding: .utf8)
        var routes: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let match = line.wholeMatch(of: #/\| `([A-Z]+)` \| `(/[^`]*)` \| [^|]+ \| `([^`]+)` \|/#) else { continue }
            routes["\(match.1) \(match.2)"] = String(match.3)
        }
        return routes
    }

    @Test func theRouteTableIsTheRoutersBothWays() async throws {
        let harness = try await Harness.make()
        let parts = try ApplicationParts(harness.configuration())
        let routes = Set(
            parts.routes.map { route in
                let path = route.path.split(separator: "/").map { $0.hasPrefix(":") ? "{\($0.dropFirst())}" : String($0) }
                return "\(route.method.rawValue) /" + path.joined(separator: "/")
            })
        let documented = try Self.routeTable()
        #expect(documented.count > 25)
        #expect(routes.subtracting(documented.keys).isEmpty, "routes ARCHITECTURE.md does not map: \(routes.subtracting(documented.keys).sorted())")
        #expect(Set(documented.keys).subtracting(routes).isEmpty, "mapped routes the router lacks: \(Set(documented.keys).subtracting(routes).sorted())")
    }

    @Test func everyFileItNamesExists() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        // A map a newcomer reads whole: the details live in docs/TESTING.md, docs/PROJECTIONS.md and the rest.
        #expect(text.split(separator: "\n", omittingEmptySubsequences: false).count <= 601, "ARCHITECTURE.md is over 600 lines")
        let files = Set(text.matches(of: #/`((?:Sources|Tests)/[A-Za-z0-9_+/.-]+\.swift)`/#).map { String($0.1) })
        #expect(files.count > 20)
        for file in files.sorted() {
            let url = TestEnvironment.packageRoot.appendingPathComponent(file)
            #expect(FileManager.default.fileExists(atPath: url.path), "\(file) is named in ARCHITECTURE.md but does not exist")
        }
    }

    /// Every type the document names in code style is one the code declares: this package's, a dependency's
    /// (its checkout), or one of the few standard and protocol names below. A renamed or deleted type
    /// leaves no stale name behind.
    @Test func everyTypeItNamesIsDeclared() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        var named: Set<String> = []
        for span in text.matches(of: #/`([^`\n]+)`/#).map({ String($0.1) }) {
            // A file, a path, SQL or a header (`Retry-After`) is not a type.
            guard !span.contains("/"), !span.hasSuffix(".swift"), !span.contains(".md"), !span.contains(".yaml"),
                let first = span.firstMatch(of: #/^[A-Z][A-Za-z0-9]*[a-z][A-Za-z0-9]*/#),
                !span.dropFirst(first.0.count).hasPrefix("-")
            else { continue }
            named.insert(String(first.0))
        }
        #expect(named.count > 200)
        var missing = named.subtracting(["String", "Double", "Int", "UInt64", "Date", "Data", "URL", "ContinuousClock"])
        // Header and cookie words, and the bad platform of an example.
        missing.subtract(["Allow", "ETag", "Vary", "HttpOnly", "Secure", "IOS"])
        for manifest in ["Package.swift", "Benchmarks/Package.swift"] {
            let package = try String(contentsOf: TestEnvironment.packageRoot.appendingPathComponent(manifest), encoding: .utf8)
            missing.subtract(package.matches(of: #/name: "([A-Za-z]+)"/#).map { String($0.1) })
        }
        // Declared here, or in a dependency's checkout: each file is searched for the names still missing.
        // The checkouts of the build the tests run from: scripts/test's (.build-tests), or `swift test`'s.
        func checkouts(of build: String) -> [String] {
            let folder = TestEnvironment.packageRoot.appendingPathComponent("\(build)/checkouts")
            return (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        }
        let build = checkouts(of: ".build-tests").isEmpty ? ".build" : ".build-tests"
        let dependencies = checkouts(of: build)
        #expect(!dependencies.isEmpty, "the dependencies' checkouts are not there")
        let declarations = ["struct", "enum", "class", "actor", "protocol", "typealias", "case", "func", "var", "let"]
        let folders = TestEnvironment.codeFolders + dependencies.sorted().map { "\(build)/checkouts/\($0)/Sources" }
        for url in TestEnvironment.swiftFiles(in: folders) {
            guard !missing.isEmpty else { break }
            guard let code = try? String(contentsOf: url, encoding: .utf8) else { continue }
            for name in missing where code.contains(name) && declarations.contains(where: { code.contains("\($0) \(name)") }) {
                missing.remove(name)
            }
        }
        #expect(missing.isEmpty, "ARCHITECTURE.md names types the code does not declare: \(missing.sorted())")
    }

    /// Every metric of the metrics table is created under its full name, in the file the table names:
    /// a name seen in Grafana is found in the code as it is.
    @Test func everyMetricIsNamedInFullInTheFileTheTableNames() throws {
        let text = try String(contentsOf: Self.document, encoding: .utf8)
        var checked = 0
        for line in text.split(separator: "\n") where line.hasPrefix("| `upshift_") {
            guard let file = line.firstMatch(of: #/\| `((?:Sources)/[^`]+\.swift)` \|$/#)?.1 else {
                Issue.record("a metric row without its file: \(line)")
                continue
            }
            let code = try String(
                contentsOf: TestEnvironment.packageRoot.appendingPathComponent(String(file)), encoding: .utf8)
            let cell = line.split(separator: "|")[0]
            for name in cell.matches(of: #/`(upshift_[a-z_]+)/#).map({ String($0.1) }) {
                checked += 1
                #expect(code.contains("\"\(name)\""), "\(name) is not created by that name in \(file)")
            }
        }
        #expect(checked > 25)
    }

    /// The comments of every Swift file, each file's comment lines joined into one text (a citation may
    /// wrap), by path.
    static func comments() throws -> [String: String] {
        var comments: [String: String] = [:]
        for url in TestEnvironment.swiftFiles() {
            let lines = try String(contentsOf: url, encoding: .utf8).split(separator: "\n").compactMap { line -> Substring? in
                let trimmed = line.drop { $0 == " " }
                guard trimmed.hasPrefix("//") else { return nil }
                return trimmed.drop { $0 == "/" }
            }
            comments[String(url.path.dropFirst(TestEnvironment.packageRoot.path.count + 1))] = lines.joined(separator: " ")
        }
        return comments
    }

    /// A comment cites the docs of this repository, by a phrase the cited document holds, never a document
    /// outside the repository or an issue number: a reader can follow every citation from the checkout.
    @Test func everyCitationOfACommentIsFoundInTheRepository() throws {
        var documents: [String: String] = [:]
        var cited = 0
        let outside = ["DESIGN", "STYLE"].map { $0 + ".md" }
        for (file, text) in try Self.comments() {
            for name in outside {
                #expect(!text.contains(name), "\(file) cites \(name), which is not in the repository")
            }
            #expect(text.firstMatch(of: #/(?i)\bissues?\s+#?[0-9]+/#) == nil, "\(file) cites an issue number")
            for match in text.matches(of: #/docs/([A-Za-z]+\.md)[^()"]{0,40}?"([^"]+)"/#) {
                let document = String(match.1)
                if documents[document] == nil {
                    let url = TestEnvironment.packageRoot.appendingPathComponent("docs/\(document)")
                    let raw = try String(contentsOf: url, encoding: .utf8)
                    documents[document] = raw.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                }
                let phrase = match.2.split(whereSeparator: \.isWhitespace).joined(separator: " ")
                cited += 1
                #expect(documents[document]!.contains(phrase), "\(file) cites \"\(phrase)\" in docs/\(document), which does not hold it")
            }
        }
        #expect(cited > 100)
    }

    /// Only the store speaks PostgresNIO (docs/ARCHITECTURE.md, "Reading rows"): the server, the CLI and the
    /// simulation reach PostgreSQL through the store's types, which offer only the statement paths that
    /// survive a connection closing under them.
    @Test func onlyTheStoreImportsPostgresNIO() throws {
        let sources = TestEnvironment.swiftFiles(in: ["Sources"])
        let importing = try sources.filter { url in
            try String(contentsOf: url, encoding: .utf8).contains(#/(?m)^(@testable )?import (PostgresNIO|_ConnectionPoolModule)\b/#)
        }.map { $0.path.replacingOccurrences(of: TestEnvironment.packageRoot.path + "/", with: "") }
        #expect(importing.contains { $0.hasPrefix("Sources/UpshiftStore/") })
        #expect(importing.filter { !$0.hasPrefix("Sources/UpshiftStore/") }.isEmpty, "\(importing)")
    }

    /// git takes a file with a NUL byte for binary: its diffs and blame are lost. A test that sends one
    /// writes it as an escape (`\u{0}`).
    @Test func noSwiftFileHoldsANulByte() throws {
        let all = TestEnvironment.swiftFiles()
        let files = try all.filter { try Data(contentsOf: $0).contains(0) }.map(\.path)
        #expect(all.count > 200)
        #expect(files.isEmpty, "Swift files with a NUL byte: \(files)")
    }
}
