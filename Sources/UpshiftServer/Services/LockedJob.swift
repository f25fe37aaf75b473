import Logging
import ServiceLifecycle
import UpshiftStore

/// A background job that one instance runs at a time: every `interval`, when `due` finds work, it takes the
/// advisory lock `lock` on a connection of its own (``AdvisoryLeadership``) and runs a pass; an error is
/// logged and the pass tried again at the next interval; a graceful shutdown ends the loop.
struct LockedJob: Sendable {
    /// The advisory lock's key, `upshift:<name>`, and the connection's `application_name`, `upshift-<name>`.
    let name: String
    let database: DatabaseSettings
    let logger: Logger

    func run(
        every interval: Duration, due: @Sendable () async throws -> Bool = { true },
        pass: @escaping @Sendable (AdvisoryLeadership.Lease) async throws -> Void
    ) async {
        while !Task.isCancelledOrShuttingDown {
            do {
                // The lock takes a connection of its own: only when there is work.
                if try await due() {
                    _ = try await AdvisoryLeadership.whileHolding(
                        "upshift:\(name)", settings: database, applicationName: "upshift-\(name)", timeout: .seconds(10),
                        logger: logger, pass)
                }
            } catch where Task.isCancelledOrShuttingDown {
                return
            } catch {
                logger.error("\(name) pass failed; retrying", metadata: ["error": "\(String(reflecting: error))"])
            }
            do {
                try await cancelWhenGracefulShutdown { try await Task.sleep(for: interval) }
            } catch {
                return
            }
        }
    }
}
