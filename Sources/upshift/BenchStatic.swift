import ArgumentParser
import Foundation
import Hummingbird
import Logging

/// `upshift bench-static`: the reference of the check benchmark (docs/BENCHMARKS.md, "Performance
/// targets") — a trivial Hummingbird route that answers every GET with fixed bytes. Hidden: it is not part of
/// the product, and not a route of the production server.
struct BenchStatic: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench-static", abstract: "Serve one file's bytes on every GET (benchmark reference).",
        shouldDisplay: false)

    @Option(help: "The file whose bytes every response carries.") var body: String
    @Option(help: "Port to listen on.") var port: Int = 8090
    @Option(help: "Address to listen on.") var host: String = "127.0.0.1"

    func run() async throws {
        guard let data = FileManager.default.contents(atPath: body) else { throw ValidationError("cannot read \(body)") }
        let bytes = ByteBuffer(bytes: data)
        let router = Router()
        router.get("**") { _, _ in
            Response(status: .ok, headers: [.contentType: "application/json"], body: .init(byteBuffer: bytes))
        }
        var logger = Logger(label: "bench-static")
        logger.logLevel = .warning
        let app = Application(
            router: router, configuration: .init(address: .hostname(host, port: port), serverName: "upshift"),
            logger: logger)
        try await app.runService()
    }
}
