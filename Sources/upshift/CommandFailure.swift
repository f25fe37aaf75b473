import Foundation
import PostgresNIO

/// Prints a failure to standard error and exits non-zero (no stack of Swift types for an operator).
struct CommandFailure: Error, CustomStringConvertible {
    var description: String

    init(description: String) {
        self.description = description
    }

    /// A database error, by the server's message.
    init(_ error: PSQLError) {
        description = "database error: \(error.serverInfo?[.message] ?? String(describing: error.code))"
    }
}
