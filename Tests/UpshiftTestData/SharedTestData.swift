import Foundation

/// The shared cases in `../shared/testdata` (or `UPSHIFT_TESTDATA`): read as they are; a missing
/// folder fails the tests, never skips them.
public enum SharedTestData {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String
    }

    public static func file(_ name: String) throws -> Data {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let folder = ProcessInfo.processInfo.environment["UPSHIFT_TESTDATA"].map { URL(fileURLWithPath: $0) }
            ?? root.deletingLastPathComponent().appendingPathComponent("shared/testdata")
        let file = folder.appendingPathComponent(name)
        guard let data = FileManager.default.contents(atPath: file.path) else {
            throw Missing(description: "test data \(file.path) is missing: set UPSHIFT_TESTDATA")
        }
        return data
    }
}
