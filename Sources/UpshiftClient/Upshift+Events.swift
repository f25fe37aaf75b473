import Foundation
import UpshiftWire

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Events: recorded to the queue file at once, sent in batches, retried with the same ids.
extension Upshift {
    /// Queues an event on disk at once; it is sent within `flushInterval`, on `flush()`, or when the app
    /// goes to the background. Nothing is recorded after `optOut()`, in previews, or in debug builds the
    /// app did not allow.
    public func record(_ event: UpshiftEvent) {
        takeFiles()
        record(event, id: UUIDv7.make(at: configuration.clock.now()))
    }

    func record(_ event: UpshiftEvent, id uuid: UUID) {
        record(event.type, fields: event.fields, id: uuid)
    }

    /// Queues an event of `type`; `session` gives the app version, build and time of an event about an
    /// earlier session (`abnormal_exit`), else they are the running app's and now.
    func record(_ type: EventType, fields: [String: String], id uuid: UUID, session: ClientState.Session? = nil) {
        guard recording else { return }
        let id = uuid.uuidString.lowercased()
        guard !queue.contains(id) else { return }
        var body: [String: JSONValue] = [
            "id": .string(id), "type": .string(type.rawValue),
            "occurredAt": .string(Timestamp.format(session?.since ?? configuration.clock.now())),
            "appId": .string(configuration.appId),
            "platform": .string(configuration.platform),
            "appVersion": .string(session?.appVersion ?? configuration.appVersion),
        ]
        if let build = session.map(\.build) ?? configuration.build { body["build"] = .number(JSONNumber(build)) }
        if let os = configuration.osVersion { body["osVersion"] = .string(os) }
        if let locale = configuration.locale { body["locale"] = .string(locale) }
        // The install id goes into the queue with the event: a queue restored from a backup onto another
        // device (where the install id, kept out of backups, is new) sends its events under the install
        // that recorded them. Unknown while the files cannot be read: the id read later is this install's.
        if let install = installIdentifier { body["installId"] = .string(install.uuidString.lowercased()) }
        for (key, value) in fields { body[key] = .string(value) }
        let evicted = queue.evicted
        // At capacity the oldest event goes: one line appended says so (no rewrite per event).
        let write = queue.append(QueuedEvent(id: id, body: body), capacity: configuration.queueCapacity)
        if queue.evicted > evicted { configuration.log("event queue full: dropped the \(queue.evicted - evicted) oldest") }
        persistQueue(write)
    }

    /// Sends every queued event now, in batches, until the queue is empty or a batch fails (then it is
    /// retried later with backoff, with the same ids, so the server stores each event once). A flush
    /// already under way (the periodic one) is waited for first, then what is left is sent, unless that
    /// flush failed (the backoff holds): on return, every event queued before the call has been sent, or a
    /// send failed. Nothing is sent while the SDK's files cannot be read (the install id is unknown).
    public func flush() async {
        await ensureStorage()
        guard storageReady, recording else { return }
        while sending {
            let failed = await withCheckedContinuation { waitingToFlush.append($0) }
            if failed { return }
        }
        sending = true
        var failed = false
        defer {
            sending = false
            let waiting = waitingToFlush
            waitingToFlush = []
            for caller in waiting { caller.resume(returning: failed) }
        }
        var batchSize = configuration.batchSize
        while !queue.events.isEmpty {
            let batch = Array(queue.events.prefix(batchSize))
            do {
                try await send(batch)
                failures = 0
                nextAttempt = nil
            } catch is TooLarge {
                batchSize = max(1, batch.count / 2)  // the server's byte limit: halves until it fits
            } catch let error as RetryLater {
                failures += 1
                let delay = configuration.retry.delay(
                    after: failures, retryAfter: error.retryAfter, random: Double.random(in: 0...1))
                nextAttempt = configuration.clock.now().addingTimeInterval(Self.seconds(delay))
                configuration.log("sending \(batch.count) events failed (\(error.reason)); retrying in \(delay)")
                failed = true
                return
            } catch {
                return  // cancelled
            }
        }
    }

    /// Stops the periodic sending (events stay queued on disk).
    public func stop() {
        sender?.cancel()
        sender = nil
    }

    func startSending() {
        guard sender == nil else { return }
        let interval = configuration.flushInterval
        sender = Task { [weak self] in
            while true {
                do { try await Task.sleep(for: interval) } catch { return }  // stopped: no last send
                guard let self else { return }
                await self.flushIfDue()
            }
        }
    }

    private func flushIfDue() async {
        if let nextAttempt, configuration.clock.now() < nextAttempt { return }
        await flush()
    }

    struct RetryLater: Error {
        var reason: String
        var retryAfter: Duration?
    }

    /// A `413` for a batch of more than one event: sent again in smaller batches.
    struct TooLarge: Error {}

    /// Says once per name (for the first 100 names) which event members the server ignored: a misspelt
    /// field, a field of another event type, or one this server's version does not know yet.
    private func logIgnored(_ results: [IngestResponse.Result]) {
        for name in results.flatMap({ $0.ignored ?? [] }) where loggedIgnored.count < 100 && loggedIgnored.insert(name).inserted {
            configuration.log("the server ignored the event field \"\(name)\" (an unknown name, or not a field of that event type)")
        }
    }

    /// Posts one batch and takes its events off the queue when the server answered for them.
    private func send(_ batch: [QueuedEvent]) async throws {
        guard let installId = installIdentifier?.uuidString.lowercased() else { throw RetryLater(reason: "no install id") }
        let events = batch.map { event in
            var body = event.body
            if body["installId"] == nil { body["installId"] = .string(installId) }  // recorded before the id was read
            return JSONValue.object(body)
        }
        var request = URLRequest(url: configuration.baseURL.appendingPathComponent("v1/events"))
        request.httpMethod = "POST"
        // gzip: a batch's events repeat the same names and values, so it shrinks to a fraction.
        request.httpBody = Data(Gzip.compress(Array(try JSONEncoder().encode(["events": events]))))
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue("gzip", forHTTPHeaderField: "Content-Encoding")
        request.setValue("Bearer \(configuration.ingestKey)", forHTTPHeaderField: "Authorization")
        request.timeoutInterval = 30
        let data: Data
        let response: HTTPURLResponse
        do {
            (data, response) = try await configuration.transport.send(request)
        } catch {
            if Task.isCancelled { throw error }
            throw RetryLater(reason: "\(error)")
        }
        let retryAfter = response.value(forHTTPHeaderField: "Retry-After").flatMap(Int.init).map { Duration.seconds($0) }
        switch response.statusCode {
        case 200:
            if let reply = try? JSONDecoder().decode(IngestResponse.self, from: data) {
                for result in reply.results where result.status == .rejected {
                    configuration.log(
                        "the server rejected event \(result.id ?? "?"), dropped: \(result.error ?? "") \(result.message ?? "")")
                }
                if configuration.isDebugBuild { logIgnored(reply.results) }
            }
        case 413 where batch.count > 1:
            throw TooLarge()
        case 429, 500...599:
            throw RetryLater(reason: "HTTP \(response.statusCode)", retryAfter: retryAfter)
        case 401, 403:
            // A wrong or revoked key: keep the events until the app ships a good one.
            throw RetryLater(reason: "HTTP \(response.statusCode): the ingest key was refused", retryAfter: retryAfter)
        default:
            configuration.log(
                "the server refused a batch of \(batch.count) events, dropped: HTTP \(response.statusCode) "
                    + String(decoding: data.prefix(300), as: UTF8.self))
        }
        persistQueue(queue.remove(Set(batch.map(\.id))))
    }
}
