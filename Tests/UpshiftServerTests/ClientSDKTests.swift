import Foundation
import PostgresNIO
import Testing
@testable import UpshiftClient
import UpshiftCore
import UpshiftTestSupport

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The Swift SDK (`UpshiftClient`) against a live server built by the composition root: real HTTP,
/// real PostgreSQL. A test transport sits in front of URLSession to stall, fail or lose answers.
@Suite(.tags(.alone), .runsAlone, .serverTimeLimit) struct ClientSDKTests {
    @Test func checkAsksWhenDueAndForceAlwaysAsks() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("soft") }
            let transport = TestTransport()
            let sdk = Upshift(configuration: Self.configuration(server, harness, version: "1.0", transport: transport))
            let first = await sdk.check()
            #expect(first.action == .soft && first.origin == .server && first.latestVersion == "2.0")
            // Offered to this install since the release was written (the test's start); no priority set.
            #expect(first.stalenessDays == 0 && first.priority == 0)
            let checkAfter = try #require(first.server?.checkAfterSeconds)
            #expect(await sdk.check().origin == .stored)
            harness.clock.advance(by: TimeInterval(checkAfter - 1))
            #expect(await sdk.check().origin == .stored)
            #expect(transport.checks == 1, "no request before it is due")
            harness.clock.advance(by: 1)
            let due = await sdk.check()
            #expect(due.origin == .server && due.stalenessDays == checkAfter / 86_400)
            #expect(await sdk.check(force: true).origin == .server)
            #expect(transport.checks == 3)
            #expect(transport.lastCheck?.value(forHTTPHeaderField: "Cache-Control") == "no-cache")
        }
    }

    @Test func theSDKAgainstTheUpshiftServeExecutable() async throws {
        // The real binary on the device's clock: nothing in between but URLSession.
        let harness = try await Harness.make()
        let process = try ServerProcess(database: harness.database, port: try await freePort())
        try await process.start()
        let server = Server(port: process.port)
        try await Self.release("2.0", on: server, harness: harness)
        try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("soft") }
        var configuration = Self.configuration(server, harness, version: "1.0")
        configuration.clock = SystemClock()
        configuration.transport = URLSessionTransport()
        let sdk = Upshift(configuration: configuration)
        await sdk.launch()
        let decision = await sdk.check()
        #expect(decision.action == .soft && decision.origin == .server && decision.latestVersion == "2.0")
        await sdk.record(.promptShown(kind: .soft, targetVersion: "2.0"))
        await sdk.remindLater(decision)
        await sdk.flush()
        #expect(await sdk.pendingEvents == 0)
        let again = await sdk.check()
        #expect(again.origin == .stored && again.action == .none && again.suppressedBy == .remindLater)
        await sdk.stop()
        // The `checked` row is written beside the check's answer, not before it: wait for it.
        let install = try #require(await sdk.installId).uuidString.lowercased()
        let query: PostgresQuery = "SELECT type FROM event_log WHERE install_id = \(install)::uuid ORDER BY type"
        var types: [String] = []
        try? await Waits.until("three events stored", timeout: .seconds(5), every: .milliseconds(20)) {
            types = try await harness.strings(query)
            return types.count >= 3
        }
        #expect(types == ["checked", "prompt_dismissed", "prompt_shown"])
        #expect(await process.terminate() == 0)
    }

    @Test func aStalledServerGetsTheStoredAnswerForThisVersionOnly() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", on: server, harness: harness)
            try await Self.policy(["minimumVersion": .string("1.5")], on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("force") }
            let directory = Self.directory()
            let transport = TestTransport()
            var configuration = Self.configuration(server, harness, version: "1.0", transport: transport, directory: directory)
            let first = await Upshift(configuration: configuration).check()
            #expect(first.action == .force && first.origin == .server, "\(first)")

            // Another launch of the same version, with a server that never answers.
            configuration.checkTimeout = .milliseconds(300)
            let sdk = Upshift(configuration: configuration)
            transport.mode = .stall
            let started = ContinuousClock.now
            let stalled = await sdk.check(force: true)
            #expect(ContinuousClock.now - started < .seconds(2), "answered within the timeout")
            #expect(stalled.origin == .stored && stalled.action == .force)

            // After an update, the stored force belongs to the old version: a stalled check answers none.
            configuration.appVersion = "2.0"
            let updated = Upshift(configuration: configuration)
            await updated.launch()
            let answer = await updated.check()
            #expect(answer.origin == .none && answer.action == .none)
            await updated.stop()
        }
    }

    @Test func laterAndSkipHoldBackSoftPromptsButNeverAForce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", on: server, harness: harness)
            try await Self.policy(["remindIntervalSeconds": .number(3_600)], on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["remindAfterSeconds"] == .number(3_600) }
            let sdk = Upshift(configuration: Self.configuration(server, harness, version: "1.0"))
            let soft = await sdk.check()
            #expect(soft.action == .soft)

            await sdk.remindLater(soft)
            let reminded = await sdk.check(force: true)
            #expect(reminded.action == .none && reminded.suppressedBy == .remindLater)
            harness.clock.advance(by: 3_600)
            #expect(await sdk.check(force: true).action == .soft, "the reminder is over")

            await sdk.skip(soft)
            let skipped = await sdk.check(force: true)
            #expect(skipped.action == .none && skipped.suppressedBy == .skipped)

            try await Self.policy(["minimumVersion": .string("2.0")], revision: 1, on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("force") }
            let forced = await sdk.check(force: true)
            #expect(forced.action == .force && forced.suppressedBy == nil, "a force ignores later and skip")

            await sdk.flush()
            #expect(await sdk.pendingEvents == 0)
            let actions = try await harness.strings(
                "SELECT data->>'dismissAction' FROM event_log WHERE type = 'prompt_dismissed' ORDER BY occurred_at, position")
            #expect(actions == ["later", "skip"])
        }
    }

    @Test func queuedEventsSurviveACrashAndAreStoredOnce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let directory = Self.directory()
            let down = TestTransport()
            down.mode = .down
            let before = Upshift(configuration: Self.configuration(server, harness, version: "1.0", transport: down, directory: directory))
            await before.record(.launched)
            await before.record(.promptShown(kind: .soft, targetVersion: "2.0"))
            await before.record(.updateStarted(kind: .soft, targetVersion: "2.0"))
            await before.flush()
            #expect(await before.pendingEvents == 3, "a failed send keeps the events")
            // The process dies here: nothing else is written.

            let after = Upshift(configuration: Self.configuration(server, harness, version: "1.0", directory: directory))
            #expect(await after.pendingEvents == 3)
            let (installBefore, installAfter) = (await before.installId, await after.installId)
            #expect(installAfter != nil && installAfter == installBefore)
            await after.flush()
            #expect(await after.pendingEvents == 0)
            let installs = try await harness.strings(
                "SELECT DISTINCT install_id::text FROM event_log WHERE install_id IS NOT NULL AND type <> 'checked'")
            #expect(installs == [installAfter?.uuidString.lowercased()])
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id IS NOT NULL AND type <> 'checked'") == 3)
        }
    }

    @Test func a503WhoseBatchWasStoredIsResentWithTheSameIdsAndCountedOnce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let transport = TestTransport()
            transport.mode = .storeThen503  // the server commits, the app sees 503
            let sdk = Upshift(configuration: Self.configuration(server, harness, version: "1.0", transport: transport))
            await sdk.record(.launched)
            await sdk.record(.blocked(targetVersion: "2.0"))
            await sdk.flush()
            #expect(await sdk.pendingEvents == 2)
            transport.mode = .pass
            await sdk.flush()
            #expect(await sdk.pendingEvents == 0)
            #expect(transport.eventPosts == 2)
            #expect(transport.lastEventReply?.contains("\"duplicates\":2") == true, "\(transport.lastEventReply ?? "")")
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id IS NOT NULL AND type <> 'checked'") == 2)
        }
    }

    @Test func aStoredBatchResentAfterThirtyDaysIsStillADuplicate() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let transport = TestTransport()
            transport.mode = .storeThen503
            let lines = LogLines()
            var configuration = Self.configuration(server, harness, version: "1.0", transport: transport)
            configuration.log = { lines.append($0) }
            let sdk = Upshift(configuration: configuration)
            await sdk.record(.launched)
            await sdk.flush()
            #expect(await sdk.pendingEvents == 1)
            // The device stays offline past the server's 30-day window, then sends again.
            harness.clock.advance(by: 31 * 86_400)
            transport.mode = .pass
            await sdk.flush()
            #expect(await sdk.pendingEvents == 0)
            #expect(transport.lastEventReply?.contains("\"duplicates\":1") == true, "\(transport.lastEventReply ?? "")")
            #expect(!lines.lines.contains { $0.contains("rejected") }, "\(lines.lines)")
        }
    }

    @Test func flushWaitsForTheSendUnderWayAndStopEndsTheSender() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            /// An SDK whose periodic sender (every 50 ms) is posting one event, answered 300 ms late.
            func sending(_ transport: TestTransport) async throws -> (Upshift, UpshiftConfiguration) {
                var configuration = Self.configuration(server, harness, version: "1.0", transport: transport)
                configuration.flushInterval = .milliseconds(50)
                let sdk = Upshift(configuration: configuration)
                await sdk.launch()
                await sdk.record(.launched)
                try? await Waits.until("a post of the periodic sender", timeout: .seconds(5), every: .milliseconds(5)) {
                    transport.eventPosts > 0
                }
                #expect(transport.eventPosts == 1, "the periodic sender is sending")
                return (sdk, configuration)
            }
            let transport = TestTransport(delay: .milliseconds(300))
            let (sdk, configuration) = try await sending(transport)
            await sdk.record(.blocked(targetVersion: "2.0"))
            await sdk.flush()
            #expect(await sdk.pendingEvents == 0, "flush() returned before the send under way and its own were done")
            await sdk.stop()

            // Once stopped, nothing more is sent, not even what is queued (ten intervals later).
            let quiet = Upshift(configuration: configuration)
            await quiet.launch()
            await quiet.record(.launched)
            let posts = transport.eventPosts
            await quiet.stop()
            try await Task.sleep(for: .milliseconds(500))
            #expect(transport.eventPosts == posts)
            #expect(await quiet.pendingEvents == 1)
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE install_id IS NOT NULL AND type <> 'checked'") == 2)

            // A flush that waited on a periodic send that failed keeps the backoff: no second request.
            let refusing = TestTransport(delay: .milliseconds(300))
            refusing.mode = .tooMany
            let (backingOff, _) = try await sending(refusing)
            await backingOff.flush()
            await backingOff.stop()
            #expect(refusing.eventPosts == 1)
            #expect(await backingOff.pendingEvents == 1)
        }
    }

    @Test func theSenderWaitsForRetryAfterThenSendsOnItsOwn() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let transport = TestTransport()
            transport.mode = .tooMany  // 429 with Retry-After: 120
            var configuration = Self.configuration(server, harness, version: "1.0", transport: transport)
            configuration.flushInterval = .milliseconds(50)
            configuration.retry = RetryPolicy(initialDelay: .seconds(1), maximumDelay: .seconds(10))
            let sdk = Upshift(configuration: configuration)
            await sdk.launch()  // starts the periodic sender
            await sdk.record(.launched)
            await sdk.flush()
            #expect(await sdk.pendingEvents == 1 && transport.eventPosts == 1)
            transport.mode = .pass
            // Past the backoff of its own (at most 1 s here), still short of Retry-After.
            harness.clock.advance(by: 2)
            try await Task.sleep(for: .milliseconds(400))  // eight intervals
            #expect(transport.eventPosts == 1, "nothing is sent before Retry-After (by the SDK's clock)")
            harness.clock.advance(by: 118)
            try? await Waits.until("the queue sent", timeout: .seconds(5), every: .milliseconds(20)) { await sdk.pendingEvents == 0 }
            #expect(await sdk.pendingEvents == 0, "sent by the periodic sender once due")
            #expect(transport.eventPosts == 2)
            await sdk.stop()
        }
    }

    @Test func aFullQueueDropsTheOldestAndCountsThem() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let directory = Self.directory()
            let down = TestTransport()
            down.mode = .down
            var configuration = Self.configuration(server, harness, version: "1.0", transport: down, directory: directory)
            configuration.queueCapacity = 3
            let offline = Upshift(configuration: configuration)
            for target in ["2.1", "2.2", "2.3", "2.4", "2.5"] { await offline.record(.blocked(targetVersion: target)) }
            #expect(await offline.pendingEvents == 3)
            #expect(await offline.droppedEvents == 2)

            configuration.transport = TestTransport()
            let online = Upshift(configuration: configuration)
            #expect(await online.droppedEvents == 2, "the count is kept with the state")
            await online.flush()
            let targets = try await harness.strings(
                "SELECT data->>'targetVersion' FROM event_log WHERE type = 'blocked' ORDER BY position")
            #expect(targets == ["2.3", "2.4", "2.5"], "the newest are kept")
        }
    }

    @Test func eventsTheServerRejectsAreDroppedWithALog() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let log = LogLines()
            var configuration = Self.configuration(server, harness, version: "1.0")
            configuration.log = { log.append($0) }
            let sdk = Upshift(configuration: configuration)
            await sdk.record(.promptShown(kind: .soft, targetVersion: "latest"))
            await sdk.record(.launched)
            await sdk.flush()
            #expect(await sdk.pendingEvents == 0)
            #expect(log.lines.contains { $0.contains("rejected") && $0.contains("dropped") }, "\(log.lines)")
            #expect(try await harness.strings("SELECT type FROM event_log WHERE install_id IS NOT NULL AND type <> 'checked'") == ["launched"])
        }
    }

    /// A field the server does not read (misspelt, or newer than the server) is named once in a debug
    /// build's log, and never in a release build's.
    @Test(arguments: [true, false]) func fieldsTheServerIgnoredAreLoggedOnceInDebugBuilds(debug: Bool) async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let log = LogLines()
            var configuration = Self.configuration(server, harness, version: "1.0")
            configuration.log = { log.append($0) }
            configuration.isDebugBuild = debug
            let sdk = Upshift(configuration: configuration)
            for _ in 0..<2 {
                await sdk.record(.launched, fields: ["osVerison": "17.5"], id: UUID())
                await sdk.record(.launched, fields: ["osVerison": "17.5", "channel": "beta"], id: UUID())
                await sdk.flush()
            }
            #expect(await sdk.pendingEvents == 0)
            let named = log.lines.filter { $0.contains("ignored") }
            #expect(named.count == (debug ? 2 : 0), "\(log.lines)")
            #expect(named.contains { $0.contains(#""osVerison""#) } == debug)
            #expect(named.contains { $0.contains(#""channel""#) } == debug)
            #expect(try await harness.count("SELECT count(*)::int8 FROM event_log WHERE type = 'launched'") == 4)
        }
    }

    @Test func aNewVersionRecordsUpdatedAndShowsWhatsNewOnce() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("1.1", notes: ["Faster sync"], on: server, harness: harness)
            try await Self.release("1.2", notes: ["Dark mode"], on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["latestVersion"] == .string("1.2") }
            let directory = Self.directory()
            let old = Upshift(configuration: Self.configuration(server, harness, version: "1.0", directory: directory))
            #expect(await old.launch() == nil)
            await old.stop()

            let new = Upshift(configuration: Self.configuration(server, harness, version: "1.2", directory: directory))
            #expect(await new.launch() == "1.0")
            _ = await new.check()
            #expect(await new.whatsNew?.map(\.version) == ["1.2", "1.1"])
            #expect(await new.whatsNew?.first?.notes == ["Dark mode"])
            await new.whatsNewShown()
            #expect(await new.whatsNew == nil)
            await new.flush()
            await new.stop()
            let stored = try await harness.strings(
                """
                SELECT type || ' ' || coalesce(data->>'fromVersion', '') FROM event_log
                WHERE install_id IS NOT NULL AND type <> 'checked' ORDER BY position
                """)
            #expect(stored == ["updated 1.0", "whats_new_shown "])

            // The next launch of the same version is not an update.
            let again = Upshift(configuration: Self.configuration(server, harness, version: "1.2", directory: directory))
            #expect(await again.launch() == nil)
            await again.stop()
        }
    }

    /// A process that ends in the foreground is reported by the next one: the server stores its
    /// `abnormal_exit` under the version and build of the session that ended, at the time it began (so
    /// before the new version's events: the install's current version is the one it runs now).
    @Test func aSessionThatEndedInTheForegroundIsStoredAsAnAbnormalExit() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            let directory = Self.directory()
            var first = Self.configuration(server, harness, version: "1.0", directory: directory)
            first.build = 10
            let crashed = Upshift(configuration: first)
            await crashed.launch()
            await crashed.enteredForeground()
            await crashed.stop()

            harness.clock.advance(by: 600)
            var second = Self.configuration(server, harness, version: "1.1", directory: directory)
            second.build = 11
            let next = Upshift(configuration: second)
            #expect(await next.launch() == "1.0")
            await next.flush()
            #expect(await next.pendingEvents == 0)
            await next.stop()
            let install = try #require(await next.installId).uuidString.lowercased()
            let stored = try await harness.strings(
                """
                SELECT type || ' ' || app_version || ' ' || coalesce(data->>'build', '') || ' ' || to_char(occurred_at AT TIME ZONE 'UTC', 'HH24:MI')
                FROM event_log WHERE install_id = \(install)::uuid AND type <> 'checked' ORDER BY type
                """)
            #expect(stored == ["abnormal_exit 1.0 10 12:00", "updated 1.1 11 12:10"])
        }
    }

    /// Device locale identifiers as Apple devices report them: the SDK reduces them to tags, and the server
    /// takes them as they are too (from SDKs that send them raw), dropping the ICU keywords after `@`.
    @Test func deviceLocalesAreAcceptedInChecksAndEvents() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", on: server, harness: harness)
            let identifiers = [
                ("en_JP@calendar=japanese", "en_JP"), ("en_US@rg=gbzzzz", "en_US"), ("ar_SA@numbers=latn", "ar_SA"),
                ("zh-Hans_CN", "zh-Hans_CN"), ("es_419", "es_419"), ("sr-Latn_RS", "sr-Latn_RS"),
            ]
            for (identifier, stored) in identifiers {
                // Through the SDK.
                var configuration = Self.configuration(server, harness, version: "1.0")
                configuration.locale = DeviceFacts.locale(identifier)
                let sdk = Upshift(configuration: configuration)
                let decision = await sdk.check()
                #expect(decision.origin == .server, "\(identifier)")
                await sdk.record(.launched)
                await sdk.flush()
                #expect(await sdk.pendingEvents == 0)
                await sdk.stop()
                // Raw, as an older client sends it.
                let query = "platform=ios&version=1.0&locale=" + identifier.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
                let check = try await server.request(.GET, "/v1/apps/\(harness.appId)/check?\(query)")
                #expect(check.status == 200, "\(identifier): \(check.text)")
                let id = UUID()
                let reply = try await server.postEvents(
                    [clientEvent(id: id, occurredAt: Self.start, extra: ["locale": identifier])], key: harness.ingestKey)
                #expect(reply.status == 200)
                let locales = try await harness.strings(
                    "SELECT data->>'locale' FROM event_log WHERE event_id = \(id)")
                #expect(locales == [stored], "\(identifier)")
            }
            // What the SDK sent (the raw identifiers above kept their `_`).
            let resolved = try await harness.strings(
                "SELECT DISTINCT data->>'locale' FROM event_log WHERE type = 'launched' AND data->>'locale' LIKE '%-%' AND position('_' IN data->>'locale') = 0 ORDER BY 1")
            #expect(resolved == ["ar-SA", "en-JP", "en-US", "es-419", "sr-Latn-RS", "zh-Hans-CN"])
        }
    }

    /// The presenter's funnel as the server stores it: a soft prompt shown and put off, then a blocking
    /// screen (the minimum raised) shown, blocked once, and the update started from it.
    @Test func thePresentersFunnelIsWhatTheServerStores() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("soft") }
            let sdk = Upshift(configuration: Self.configuration(server, harness, version: "1.0"))
            let presenter = await UpshiftPresenter(upshift: sdk)
            await presenter.show(await sdk.check())
            #expect(await presenter.presentation.softPrompt?.targetVersion == "2.0")
            await presenter.later()
            try await Self.policy(["minimumVersion": .string("2.0")], on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("force") }
            await presenter.show(await sdk.check(force: true))
            #expect(await presenter.presentation.blockingScreen?.targetVersion == "2.0")
            await presenter.show(await sdk.check(force: true))  // the same screen: nothing new
            _ = await presenter.update()
            await sdk.flush()
            #expect(await sdk.pendingEvents == 0)
            let install = try #require(await sdk.installId).uuidString.lowercased()
            let rows = try await harness.strings(
                """
                SELECT type || ':' || coalesce(data->>'promptKind', '') || ':' || coalesce(data->>'dismissAction', '')
                FROM event_log WHERE install_id = \(install)::uuid AND type <> 'checked' ORDER BY occurred_at, recorded_at, type
                """)
            #expect(
                rows.sorted() == [
                    "blocked::", "prompt_dismissed:soft:later", "prompt_shown:force:", "prompt_shown:soft:",
                    "update_started:force:",
                ])
            await sdk.stop()
        }
    }

    /// The rest of the presenter's funnel as the server stores it: a soft prompt skipped, a soft prompt
    /// that sent the user to the store (`update_started` of kind soft), What's New shown after an update.
    @Test func skipSoftUpdatesAndWhatsNewAreWhatTheServerStores() async throws {
        let harness = try await Harness.make(now: Self.start)
        try await harness.run { (server: Server) async throws in
            try await Self.release("2.0", notes: ["Shared budgets"], on: server, harness: harness)
            try await Self.waitUntil(server, harness, version: "1.0") { $0["action"] == .string("soft") }
            /// One install's funnel as stored: type:promptKind:dismissAction:targetVersion, by type.
            func stored(_ sdk: Upshift) async throws -> [String] {
                await sdk.flush()
                #expect(await sdk.pendingEvents == 0)
                let install = try #require(await sdk.installId).uuidString.lowercased()
                return try await harness.strings(
                    """
                    SELECT type || ':' || coalesce(data->>'promptKind', '') || ':' || coalesce(data->>'dismissAction', '')
                        || ':' || coalesce(data->>'targetVersion', '')
                    FROM event_log WHERE install_id = \(install)::uuid AND type <> 'checked' ORDER BY type
                    """)
            }

            let skipper = Upshift(configuration: Self.configuration(server, harness, version: "1.0"))
            let skipping = await UpshiftPresenter(upshift: skipper)
            await skipping.show(await skipper.check())
            #expect(await skipping.presentation.softPrompt?.allowSkip == true)
            await skipping.skip()
            #expect(await skipping.presentation == .none)
            #expect(try await stored(skipper) == ["prompt_dismissed:soft:skip:2.0", "prompt_shown:soft::2.0"])

            var configuration = Self.configuration(server, harness, version: "1.0")
            configuration.appStoreId = "1234567890"
            let updater = Upshift(configuration: configuration)
            let updating = await UpshiftPresenter(upshift: updater)
            await updating.show(await updater.check())
            #expect(await updating.update() != nil)
            #expect(await updating.presentation == .none)
            #expect(try await stored(updater) == ["prompt_shown:soft::2.0", "update_started:soft::2.0"])

            let directory = Self.directory()
            let old = Upshift(configuration: Self.configuration(server, harness, version: "1.0", directory: directory))
            #expect(await old.launch() == nil)
            await old.stop()
            let new = Upshift(configuration: Self.configuration(server, harness, version: "2.0", directory: directory))
            #expect(await new.launch() == "1.0")
            let presenter = await UpshiftPresenter(upshift: new)
            await presenter.show(await new.check())
            #expect(await presenter.presentation.whatsNew == [VersionNotes(version: "2.0", notes: ["Shared budgets"])])
            await presenter.whatsNewDismissed()
            #expect(await presenter.presentation == .none)
            #expect(try await stored(new) == ["updated:::", "whats_new_shown:::"])
            await new.stop()
        }
    }

    // MARK: Helpers

    static let start = Timestamp.parse("2026-06-01T12:00:00Z")!

    static func directory() -> URL {
        TestEnvironment.scratch("sdk")
    }

    static func configuration(
        _ server: Server, _ harness: Harness, version: String, transport: TestTransport = TestTransport(),
        directory: URL = directory()
    ) -> UpshiftConfiguration {
        var configuration = UpshiftConfiguration(
            appId: harness.appId.rawValue, platform: "ios", ingestKey: harness.ingestKey,
            baseURL: URL(string: "http://127.0.0.1:\(server.port)")!, storageDirectory: directory,
            appVersion: version, osVersion: "17.4", locale: "en")
        configuration.clock = harness.clock
        configuration.transport = transport
        configuration.log = { _ in }
        configuration.sendFromDebugBuilds = true  // `swift test` builds for debug
        return configuration
    }

    static func release(_ version: String, notes: [String] = [], on server: Server, harness: Harness) async throws {
        let body: JSONValue = .object([
            "platform": .string("ios"), "version": .string(version), "releasedAt": .string("2026-05-01T00:00:00Z"),
            "notes": .object(["en": .array(notes.map(JSONValue.string))]),
        ])
        let reply = try await server.send(.POST, "/v1/apps/\(harness.appId)/releases", key: harness.adminKey, json: body)
        #expect(reply.status == 201, "\(reply.text)")
    }

    /// Waits until the check endpoint answers `version` as `condition` wants: catalog writes reach its
    /// snapshot by NOTIFY, a moment after the write's response.
    static func waitUntil(
        _ server: Server, _ harness: Harness, version: String, _ condition: @Sendable (JSONValue) -> Bool
    ) async throws {
        let path = "/v1/apps/\(harness.appId)/check?platform=ios&version=\(version)"
        try await Waits.until("the check of \(version) changing", timeout: .seconds(5), every: .milliseconds(20)) {
            condition(try await server.request(.GET, path).value())
        }
    }

    static func policy(_ fields: [String: JSONValue], revision: Int = 0, on server: Server, harness: Harness) async throws {
        var body = fields
        body["enabled"] = .bool(true)
        let reply = try await server.send(
            .PUT, "/v1/apps/\(harness.appId)/policies/ios", key: harness.adminKey, json: .object(body),
            headers: [("If-Match", "\"\(revision)\"")])
        #expect(reply.status == 200, "\(reply.text)")
    }
}

extension Harness {
    func strings(_ query: PostgresQuery) async throws -> [String] {
        try await sql { client in
            var result: [String] = []
            for try await value in try await client.query(query).decode(String.self) { result.append(value) }
            return result
        }
    }
}

/// Lines collected from several tasks.
final class LogLines: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [String] = []
    var lines: [String] { lock.withLock { stored } }
    func append(_ line: String) { lock.withLock { stored.append(line) } }
}

/// URLSession, with faults on demand: stall (never answers), down (network error), store-then-503
/// (the server gets the batch and commits it, the app sees a 503), or too many (429, Retry-After 120 s);
/// and a delay before any answer.
final class TestTransport: UpshiftTransport, @unchecked Sendable {
    enum Mode { case pass, stall, down, storeThen503, tooMany }

    private let inner = URLSessionTransport()
    private let lock = NSLock()
    private var state: (mode: Mode, checks: Int, eventPosts: Int, lastCheck: URLRequest?, lastEventReply: String?) =
        (.pass, 0, 0, nil, nil)

    var mode: Mode {
        get { lock.withLock { state.mode } }
        set { lock.withLock { state.mode = newValue } }
    }
    /// Waited before every answer.
    let delay: Duration

    init(delay: Duration = .zero) { self.delay = delay }
    var checks: Int { lock.withLock { state.checks } }
    var eventPosts: Int { lock.withLock { state.eventPosts } }
    var lastCheck: URLRequest? { lock.withLock { state.lastCheck } }
    var lastEventReply: String? { lock.withLock { state.lastEventReply } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let isCheck = request.url?.path.hasSuffix("/check") == true
        let mode = lock.withLock {
            if isCheck {
                state.checks += 1
                state.lastCheck = request
            } else {
                state.eventPosts += 1
            }
            return state.mode
        }
        if delay > .zero { try await Task.sleep(for: delay) }
        switch mode {
        case .stall:
            try await Task.sleep(for: .seconds(60))
            throw URLError(.timedOut)
        case .down:
            throw URLError(.cannotConnectToHost)
        case .tooMany:
            let response = HTTPURLResponse(
                url: request.url!, statusCode: 429, httpVersion: "HTTP/1.1", headerFields: ["Retry-After": "120"])!
            return (Data(), response)
        case .pass, .storeThen503:
            let (data, response) = try await inner.send(request)
            if !isCheck { lock.withLock { state.lastEventReply = String(decoding: data, as: UTF8.self) } }
            guard mode == .storeThen503, !isCheck else { return (data, response) }
            let unavailable = HTTPURLResponse(
                url: request.url!, statusCode: 503, httpVersion: "HTTP/1.1", headerFields: ["Retry-After": "1"])!
            return (Data(), unavailable)
        }
    }
}
