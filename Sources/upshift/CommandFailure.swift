import Foundation
import UpshiftStore

/// Prints a failure to standard error and exits non-zero (no stack of Swift types for an operator).
struct CommandFailure: Error, CustomStringConvertible {
    var description: String

    init(description: String) {
        self.description = description
    }

    /// A database error, by the server's message; nil for any other error.
    init?(database error: any Error) {
        guard let failure = Database.failure(error) else { return nil }
        description = "database error: \(failure)"
    }
}
