import Foundation
import Logging
import PostgresNIO
import Synchronization

/// How a leader and its standbys find out that the leader's host vanished (docs/OPERATIONS.md, "Host loss
/// and partitions").
///
/// A session advisory lock lives as long as its session, and PostgreSQL ends a session when its socket
/// closes. A host that vanishes, or a partition, closes nothing: without help the lock would stay held
/// until the kernels' keepalives give up (two hours by default), and every projection and the rollout
/// worker would stand still that long. PostgresNIO sets no socket options, so the check is made in
/// the application, from both sides:
///
/// - **The leader** sends `SELECT 1` on its lock connection every ``interval`` (each within
///   ``deadline``) while no statement of its own runs there: between its operations, and through a pause
///   within one (``whileIdle(_:)``: a rebuild's rest between two steps). While one of its statements has
///   waited for its answer for longer than ``deadline`` (``AwaitedAnswers``), it asks instead, on another
///   connection where it has one (a projection's pool), whether its session is still `active` in
///   `pg_stat_activity`: a session that is gone, or idle for 2 s while the leader still waits for its
///   answer, means the connection is half open. While the leader works on an answer it has (folding a
///   release's week of events can take seconds on a loaded machine), nothing is asked: its session is idle
///   in its transaction then, and it is the leader's turn, not PostgreSQL's. After ``misses`` of either
///   missed in a row (at most about 5.5 s after the last answer) it closes the connection: the statement
///   in flight fails at once, its work stops, and it never goes on as leader on a half-open connection.
/// - **A standby** that finds the lock held looks at the holder's session: one idle (in a transaction
///   or not) for longer than ``standbyBound`` has missed more than ``misses`` heartbeats, so its leader
///   has stopped or is gone. The standby ends it (`pg_terminate_backend`), logs it, and takes the lock.
/// - **PostgreSQL** is asked, in every session's startup parameters, to probe an idle client after 5 s
///   and give up after 5 probes a second apart, and to drop a connection whose sent data stays
///   unacknowledged for 10 s (``DatabaseSettings``): the bound when no standby runs.
public final class LeaderHeartbeat: Sendable {
    /// Between two heartbeats.
    public static let interval: Duration = .seconds(1)
    /// How long one heartbeat may take.
    public static let deadline: Duration = .milliseconds(1500)
    /// Heartbeats missed in a row after which a leader lets go.
    public static let misses = 3
    /// A lock holder's session idle for longer than this is ended by a standby: more than the longest a
    /// leader takes to let go (``misses`` × (``interval`` + ``deadline``) at worst, 7.5 s… in practice
    /// 5.5 s, since a missed heartbeat is followed by the next at once).
    public static let standbyBound: Duration = .seconds(7)

    /// Asks, on another connection, for a session's state in `pg_stat_activity` and the seconds since it
    /// last changed (nil: no such session).
    public typealias SessionProbe = @Sendable (_ pid: Int32) async throws -> (state: String, seconds: Double)?

    let connection: StoreConnection
    let role: String
    let logger: Logger
    /// The lock session's process id and how to ask about it elsewhere, when the leader has another connection.
    let session: (pid: Int32, probe: SessionProbe)?
    /// Operations of the leader running on the connection now.
    private let busy = Mutex(0)
    /// The leader's statements waiting for PostgreSQL's answer, counted on ``leaderConnection``.
    let answers = AwaitedAnswers()

    /// The connection as the leader uses it: each statement counted while it waits for its answer.
    var leaderConnection: StoreConnection { connection.watched(by: answers) }

    init(connection: StoreConnection, role: String, session: (pid: Int32, probe: SessionProbe)?, logger: Logger) {
        self.connection = connection
        self.role = role
        self.session = session
        self.logger = logger
    }

    /// Runs `statement` as one of the leader's: no heartbeat is sent on the connection while it runs.
    func whileBusy<T: Sendable>(_ statement: () async throws -> T) async throws -> T {
        busy.withLock { $0 += 1 }
        defer { busy.withLock { $0 -= 1 } }
        return try await statement()
    }

    /// Runs `pause`, a wait of the leader's between its statements within ``whileBusy(_:)`` (a rebuild's
    /// rest between two steps), as idle time: the connection runs nothing of the leader's meanwhile, so
    /// heartbeats go there as between operations.
    func whileIdle<T: Sendable>(_ pause: () async throws -> T) async throws -> T {
        busy.withLock { $0 -= 1 }
        defer { busy.withLock { $0 += 1 } }
        return try await pause()
    }

    /// Beats until the connection closes or the task is cancelled; closes the connection after
    /// ``misses`` missed heartbeats in a row.
    func run() async {
        var missed = 0
        while !Task.isCancelled, !connection.isClosed {
            let started = ContinuousClock.now
            let statements = busy.withLock { $0 }
            let waiting = answers.since.map { started - $0 > Self.deadline } ?? false
            let answered: Bool? = statements == 0 ? await beat() : waiting ? await probeBusySession() : nil
            if let answered {
                if answered {
                    missed = 0
                } else {
                    missed += 1
                    logger.warning(
                        "leader heartbeat missed", metadata: ["role": "\(role)", "missed": "\(missed)", "of": "\(Self.misses)"])
                    if missed >= Self.misses {
                        logger.error(
                            "leader lost its database connection (no heartbeat answered); letting go of the lock",
                            metadata: ["role": "\(role)"])
                        try? await connection.close()
                        return
                    }
                    continue  // the next heartbeat at once: the time went by waiting
                }
            }
            try? await Task.sleep(until: started.advanced(by: Self.interval), clock: .continuous)
        }
    }

    /// While a statement runs: true when the lock session is `active` (PostgreSQL works on it), or idle
    /// for less than 2 s (between two statements of a transaction, while the leader computes), as seen
    /// from another connection; true also when the leader has no other connection (the statement's own
    /// time limit bounds it then).
    private func probeBusySession() async -> Bool {
        guard let (pid, probe) = session else { return true }
        do {
            guard let found = try await withDeadline(Self.deadline, { try await probe(pid) }) else { return false }
            return found.state == "active" || found.seconds < 2
        } catch {
            return false
        }
    }

    /// One heartbeat: true when PostgreSQL answered (an error it sent counts; it is alive).
    private func beat() async -> Bool {
        let (connection, logger) = (connection, logger)
        do {
            try await withDeadline(Self.deadline, abandonWhen: { connection.isClosed }) {
                _ = try await connection.query("SELECT 1", logger: logger)
            }
            return true
        } catch let error as PSQLError where error.serverInfo != nil {
            return true
        } catch {
            return false
        }
    }

    /// Runs `body` with a heartbeat on `connection` beside it; the heartbeat ends with `body`.
    static func beside<T: Sendable>(
        _ connection: StoreConnection, role: String, probe: SessionProbe? = nil, logger: Logger,
        _ body: @Sendable (LeaderHeartbeat) async throws -> T
    ) async throws -> T {
        var session: (pid: Int32, probe: SessionProbe)?
        if let probe {
            for try await pid in try await connection.query("SELECT pg_backend_pid()", logger: logger).decode(Int32.self) {
                session = (pid, probe)
            }
        }
        let heartbeat = LeaderHeartbeat(connection: connection, role: role, session: session, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await heartbeat.run() }
            defer { group.cancelAll() }
            return try await body(heartbeat)
        }
    }

    /// Called by a standby that did not get the lock `key`: ends the session of its holder when that
    /// session has been idle for longer than ``standbyBound`` (its leader missed its heartbeats). True
    /// when a session was ended (the caller tries the lock again at once).
    static func endStaleHolder(
        of key: String, on connection: StoreConnection, role: String, logger: Logger
    ) async throws -> Bool {
        let ended: [(pid: Int32, state: String, idle: Double)]
        do {
            ended = try await terminateStaleHolder(of: key, on: connection, logger: logger)
        } catch let error as PSQLError where error.serverInfo != nil {
            // PostgreSQL refused (`pg_terminate_backend` needs the holder's role or `pg_signal_backend`): the
            // standby waits for PostgreSQL's own keepalives to end the session.
            logger.warning(
                "cannot end the session of a leader that stopped answering; waiting for PostgreSQL to",
                metadata: ["role": "\(role)", "error": "\(error.serverInfo?[.message] ?? "")"])
            return false
        }
        for (pid, state, idle) in ended {
            logger.warning(
                "ended the session of a leader that stopped answering; taking over",
                metadata: [
                    "role": "\(role)", "pid": "\(pid)", "state": "\(state)",
                    "idleSeconds": "\(String(format: "%.1f", idle))",
                ])
        }
        return !ended.isEmpty
    }

    /// Ends the session holding the lock `key` when it has been idle longer than ``standbyBound``; the
    /// sessions ended, with their state and idle seconds.
    private static func terminateStaleHolder(
        of key: String, on connection: StoreConnection, logger: Logger
    ) async throws -> [(pid: Int32, state: String, idle: Double)] {
        let bound = Double(standbyBound.components.seconds)
        var ended: [(pid: Int32, state: String, idle: Double)] = []
        for try await row in try await connection.query(
            """
            SELECT a.pid, a.state, extract(epoch FROM now() - a.state_change)::float8,
                   pg_terminate_backend(a.pid, 2000)
            FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
            WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
              AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              AND ((l.classid::int8 << 32) | l.objid::int8) = hashtextextended(\(key), 0)
              AND a.pid <> pg_backend_pid()
              AND a.state IN ('idle', 'idle in transaction', 'idle in transaction (aborted)')
              AND a.state_change < now() - make_interval(secs => \(bound))
            """, logger: logger
        ).decode((Int32, String, Double, Bool).self) {
            if row.3 { ended.append((row.0, row.1, row.2)) }
        }
        return ended
    }
}

/// The statements of a connection waiting for PostgreSQL's answer (``StoreConnection/watched(by:)``), and
/// since when the oldest of them has: what tells a half-open connection from a leader busy with an answer.
final class AwaitedAnswers: Sendable {
    private let state = Mutex<(count: Int, since: ContinuousClock.Instant)>((0, .now))

    /// Since when a statement has waited, or nil while none does.
    var since: ContinuousClock.Instant? { state.withLock { $0.count == 0 ? nil : $0.since } }

    func waiting<T>(_ body: () async throws -> T) async throws -> T {
        state.withLock { state in
            if state.count == 0 { state.since = .now }
            state.count += 1
        }
        defer { state.withLock { $0.count -= 1 } }
        return try await body()
    }
}
