import Logging
import PostgresNIO
import UpshiftStore

/// Asks PostgreSQL whether it answers, within a bound.
struct DatabaseProbe: Sendable {
    let client: PostgresClient
    let logger: Logger

    func isReachable(within limit: Duration = .seconds(2)) async -> Bool {
        do {
            return try await withDeadline(limit) {
                let rows = try await client.query("SELECT 1", logger: logger)
                for try await _ in rows {}
                return true
            }
        } catch {
            return false
        }
    }
}
