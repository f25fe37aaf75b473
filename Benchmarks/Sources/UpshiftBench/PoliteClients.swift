import BenchmarkKit
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The polite side of `scripts/bench memory`: clients that each post a batch of events once a second, and
/// send a refused batch again, unchanged, after its `Retry-After`, as the SDK keeps its queue, until it is
/// stored. Each client has an install id and a client address (`X-Forwarded-For`) of its own.
final class PoliteClients: @unchecked Sendable {
    struct Settings {
        var url: String
        var key: String
        var app: String
        var clients: Int
        var eventsPerBatch: Int
        var duration: Double
        /// How long a batch still refused at the end of the run may be sent again.
        var grace: Double = 60
    }

    struct Outcome {
        var batchesStored = 0
        /// Batches given up: still refused after the grace period, or answered with a status that is
        /// neither `200` nor a refusal to retry.
        var batchesLost = 0
        var answers: [Int: Int] = [:]
        /// Answers that were not HTTP at all (a reset, a timeout), by description.
        var failures: [String: Int] = [:]
    }

    let settings: Settings
    private let outcome = Protected(Outcome())

    init(_ settings: Settings) {
        self.settings = settings
    }

    /// The install id of client `index`: the summary counts what the log holds of these.
    static func installId(_ index: Int) -> String { String(format: "00000000-0000-4000-8000-%012d", index + 1) }

    /// Runs every client on a thread of its own and waits for all of them.
    func run() -> Outcome {
        let group = DispatchGroup()
        for index in 0..<settings.clients {
            group.enter()
            Thread { [self] in
                client(index)
                group.leave()
            }.start()
        }
        group.wait()
        return outcome.withLock { $0 }
    }

    private func client(_ index: Int) {
        let session = URLSession(configuration: .ephemeral)
        let start = Date()
        var next = start
        while Date().timeIntervalSince(start) < settings.duration {
            let stored = post(batch(index), from: index, session: session, giveUpAt: start.addingTimeInterval(settings.duration + settings.grace))
            outcome.withLock { if stored { $0.batchesStored += 1 } else { $0.batchesLost += 1 } }
            next = max(next.addingTimeInterval(1), Date())
            Thread.sleep(until: next)
        }
        session.invalidateAndCancel()
    }

    private func batch(_ index: Int) -> String {
        let now = Format.iso8601(Date())
        let install = Self.installId(index)
        let events = (0..<settings.eventsPerBatch).map { _ in
            #"{"id":"\#(UUID().uuidString.lowercased())","occurredAt":"\#(now)","installId":"\#(install)","platform":"ios","appVersion":"1.0.0","type":"launched","appId":"\#(settings.app)"}"#
        }
        return #"{"events":[\#(events.joined(separator: ","))]}"#
    }

    /// Posts `body` until it is stored (`200`), waiting `Retry-After` after each `429` or `503`; false
    /// when it is answered otherwise or `giveUpAt` passes.
    private func post(_ body: String, from index: Int, session: URLSession, giveUpAt: Date) -> Bool {
        let headers = [
            "Content-Type": "application/json", "Authorization": "Bearer \(settings.key)",
            "X-Forwarded-For": "198.51.\(index / 256).\(index % 256)",
        ]
        while Date() < giveUpAt {
            let answer: HTTP.Reply
            do {
                answer = try HTTP.send("POST", settings.url + "/v1/events", body: body, headers: headers, session: session)
            } catch {
                outcome.withLock { $0.failures["\(error)", default: 0] += 1 }
                Thread.sleep(forTimeInterval: 1)
                continue
            }
            outcome.withLock { $0.answers[answer.status, default: 0] += 1 }
            switch answer.status {
            case 200: return true
            case 429, 503: Thread.sleep(forTimeInterval: answer.retryAfter ?? 1)
            default: return false
            }
        }
        return false
    }
}
