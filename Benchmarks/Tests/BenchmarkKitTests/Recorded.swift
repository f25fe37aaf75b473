import Foundation

/// Outputs of real runs of `scripts/bench` (its bash version, whose tables docs/BENCHMARKS.md publishes),
/// kept in `Recorded/`.
enum Recorded {
    static let folder = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Recorded")

    static func text(_ path: String) throws -> String {
        try String(contentsOf: folder.appendingPathComponent(path), encoding: .utf8)
    }

    /// The lines of a recorded summary.
    static func lines(_ path: String) throws -> [String] {
        try text(path).split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    }
}
