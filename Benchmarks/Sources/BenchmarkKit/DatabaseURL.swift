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

    /// The authority's parts: what precedes the host (`postgres://user@`), the host, and what follows it
    /// (`:port/database?query`).
    private var parts: (head: Substring, host: Substring, tail: Substring) {
        let text = Substring(description)
        let authorityStart = text.range(of: "://").map(\.upperBound) ?? text.startIndex
        let authorityEnd = text[authorityStart...].firstIndex(of: "/") ?? text.endIndex
        let hostStart = text[authorityStart..<authorityEnd].lastIndex(of: "@").map { text.index(after: $0) } ?? authorityStart
        let hostEnd = text[hostStart..<authorityEnd].firstIndex(of: ":") ?? authorityEnd
        return (text[..<hostStart], text[hostStart..<hostEnd], text[hostEnd...])
    }

    /// The same URL reaching the server through another address (the chaos run's partition drops one).
    public func host(_ host: String) -> DatabaseURL {
        let (head, _, tail) = parts
        return DatabaseURL("\(head)\(host)\(tail)")
    }

    /// The port of the URL (5432 when it names none).
    public var port: Int {
        let tail = parts.tail
        guard tail.hasPrefix(":") else { return 5432 }
        return Int(tail.dropFirst().prefix { $0.isNumber }) ?? 5432
    }
}
