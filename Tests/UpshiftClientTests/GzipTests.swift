import Foundation
import Testing

@testable import UpshiftClient

/// The SDK's gzip, read back by gzip(1); that the server takes it is what every test of
/// `UpshiftServerTests/ClientSDKTests` does, since every batch is posted so.
@Suite struct GzipTests {
    static func gunzip(_ bytes: [UInt8]) throws -> [UInt8] {
        let input = FileManager.default.temporaryDirectory.appendingPathComponent("upshift-gzip-\(UUID()).gz")
        try Data(bytes).write(to: input)
        defer { try? FileManager.default.removeItem(at: input) }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["gzip", "-dc", input.path]
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)  // gzip checks the CRC and the length too
        return Array(data)
    }

    static var samples: [[UInt8]] {
        var generator = SystemRandomNumberGenerator()
        let random = (0..<70_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let event = #"{"appId":"expenses","appVersion":"1.0","id":"0190b0c4-6b7e-7c1d-9a2b-3c4d5e6f7a8b","type":"launched"},"#
        return [
            [], Array("a".utf8), Array("abcabcabcabcabcabc".utf8),
            [UInt8](repeating: 0x41, count: 100_000),  // matches of the maximum length, over and over
            Array(String(repeating: event, count: 500).utf8),  // a batch, beyond the 32 KiB window
            random, random.prefix(1000) + [UInt8](repeating: 7, count: 300) + random.prefix(1000),
        ]
    }

    @Test(arguments: samples)
    func gzipReadsBackWhatWasCompressed(_ input: [UInt8]) throws {
        let compressed = Gzip.compress(input)
        #expect(try Self.gunzip(compressed) == input)
    }

    @Test func aBatchShrinksToAFraction() {
        let event = #"{"appId":"expenses","appVersion":"1.0","id":"0190b0c4-6b7e-7c1d-9a2b-3c4d5e6f7a8b","type":"launched"},"#
        let batch = Array(String(repeating: event, count: 100).utf8)
        #expect(Gzip.compress(batch).count * 10 < batch.count)
    }
}
