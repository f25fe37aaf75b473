/// A `postgres://` connection URL, as scripts/lib/postgres.sh exports it in DATABASE_URL.
public struct DatabaseURL: Sendable, Equatable, CustomStringConvertible {
    public let description: String

    public init(_ text: String) {
        description = text
    }

    /// The same server, user and `?query`, another database: each benchmark drops and recreates its own.
    public func database(_ name: String) -> DatabaseURL {
        let parts = description.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        let base = parts[0]
        let query = parts.count > 1 ? "?" + parts[1] : ""
        let server = base.lastIndex(of: "/").map { base[..<$0] } ?? base
        return DatabaseURL("\(server)/\(name)\(query)")
    }
}
