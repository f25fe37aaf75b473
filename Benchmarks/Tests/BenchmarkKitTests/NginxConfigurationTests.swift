import Testing

@testable import BenchmarkKit

@Suite struct NginxConfigurationTests {
    /// The configuration case (a) of the recorded run served with.
    @Test func isTheRecordedOne() throws {
        let folder = "/tmp/bench-before/.bench/check-20261124-164441/nginx"
        let configuration = NginxConfiguration(
            folder: folder, port: 18080, workers: 2, root: "/tmp/bench-before/.bench", file: "check-body.json")
        #expect(configuration.text == (try Recorded.text("check/nginx.conf")))
    }
}
