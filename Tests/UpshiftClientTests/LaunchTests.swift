import Foundation
import Testing
import UpshiftClient

/// `launch`: updates, the baseline of an install without SDK state, migration steps and their report.
@Suite struct LaunchTests {
    static func steps(_ versions: [String], ran: Lines, failOnce: String? = nil, failed: Lines = Lines()) -> [MigrationStep] {
        versions.map { version in
            MigrationStep(version: version) {
                if version == failOnce, failed.lines.isEmpty {
                    failed.append(version)
                    throw InjectedFailure()
                }
                ran.append(version)
            }
        }
    }

    @Test func stepsRunInOrderOnceEachAcrossSkippedVersions() async throws {
        let directory = Fixture.directory()
        let ran = Lines()
        let failed = Lines()
        func launch(_ version: String) async -> LaunchReport {
            let sdk = Upshift(configuration: Fixture.configuration(version: version, directory: directory))
            let report = await sdk.launch(
                migrations: Self.steps(["1.4", "1.1", "1.3", "1.2"], ran: ran, failOnce: "1.2", failed: failed),
                baseline: .freshInstall)
            await sdk.stop()
            return report
        }
        #expect(await launch("1.0").stepsRun == [])  // a fresh install: nothing to migrate
        let second = await launch("1.3")  // 1.1 runs, 1.2 fails: the sequence stops there
        #expect(second.stepsRun == ["1.1"])
        #expect(second.stepFailed == "1.2")
        #expect(second.updatedFrom == "1.0")
        let third = await launch("1.3")  // 1.2 again, then 1.3; 1.4 is not out for this app version
        #expect(third.stepsRun == ["1.2", "1.3"])
        #expect(third.stepFailed == nil && third.stepInterrupted == nil)
        #expect(await launch("1.3").stepsRun == [])
        #expect(await launch("1.4").stepsRun == ["1.4"])
        #expect(ran.lines == ["1.1", "1.2", "1.3", "1.4"])
    }

    @Test func theFirstReleaseWithTheSDKMigratesExistingUsers() async throws {
        let directory = Fixture.directory()
        let ran = Lines()
        let server = FakeServer()
        let sdk = Upshift(configuration: Fixture.configuration(version: "2.3", directory: directory, server: server))
        let report = await sdk.launch(
            migrations: Self.steps(["1.5", "2.0", "2.3"], ran: ran),
            baseline: .inspect { .existingData(version: "1.9") })
        #expect(report.updatedFrom == "1.9")
        #expect(report.stepsRun == ["2.0", "2.3"])
        #expect(ran.lines == ["2.0", "2.3"])
        _ = await sdk.check()
        #expect(server.lastCheck("previous") == "1.9")  // What's New from 1.9 on
        await sdk.flush()
        #expect(server.types() == ["updated"])
        #expect(server.events.first?["fromVersion"] == .string("1.9"))
        await sdk.stop()
    }

    @Test func aBaselineThatCannotTellRunsNoStepAndMarksNoneDone() async throws {
        let directory = Fixture.directory()
        let ran = Lines()
        let sdk = Upshift(configuration: Fixture.configuration(version: "2.0", directory: directory))
        let report = await sdk.launch(migrations: Self.steps(["2.0"], ran: ran), baseline: .inspect { nil })
        #expect(report.dataVersionUnknown)
        #expect(ran.lines.isEmpty)
        await sdk.stop()
        let again = Upshift(configuration: Fixture.configuration(version: "2.0", directory: directory))
        let next = await again.launch(migrations: Self.steps(["2.0"], ran: ran), baseline: .existingData(version: "1.0"))
        #expect(next.stepsRun == ["2.0"])
        await again.stop()
    }

    /// A step the process dies in (here: one that never returns, and its SDK is dropped) is reported as
    /// interrupted at the next launch, started again, and abandoned after three attempts.
    @Test func aStepThatKeepsCrashingIsAbandonedAfterThreeAttempts() async throws {
        let directory = Fixture.directory()
        let first = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory))
        await first.launch(migrations: [], baseline: .freshInstall)
        await first.stop()
        let started = Lines()
        let hangs = MigrationStep(version: "2.0") {
            started.append("2.0")
            try await Task.sleep(for: .seconds(3600))
        }
        var launches: [Task<LaunchReport, Never>] = []
        var reports: [LaunchReport] = []
        for attempt in 1...4 {
            let sdk = Upshift(configuration: Fixture.configuration(version: "2.0", directory: directory))
            let launch = Task { await sdk.launch(migrations: [hangs], baseline: .freshInstall) }
            if attempt <= 3 {
                // Wait until the step runs, then leave it hanging, as a crashed process would.
                while started.lines.count < attempt { try await Task.sleep(for: .milliseconds(10)) }
                launches.append(launch)
                reports.append(await sdk.lastLaunch ?? LaunchReport())
            } else {
                reports.append(await launch.value)
            }
            await sdk.stop()
        }
        #expect(started.lines.count == 3)
        let last = try #require(reports.last)
        #expect(last.stepAbandoned == "2.0")
        #expect(last.stepInterrupted == "2.0")
        #expect(last.stepsRun.isEmpty)
        for launch in launches { launch.cancel() }
    }

    @Test func anUpdateRecordedTwiceByAKilledLaunchIsOneEvent() async throws {
        let directory = Fixture.directory()
        let server = FakeServer()
        server.down = true
        let first = Upshift(configuration: Fixture.configuration(version: "1.0", directory: directory, server: server))
        await first.launch(migrations: [], baseline: .freshInstall)
        await first.stop()
        // The state cannot be saved (as if the process was killed after the event was queued).
        let fileSystem = FaultyFileSystem()
        fileSystem.refuseWrites = ["state.json"]
        let killed = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, server: server, fileSystem: fileSystem))
        #expect(await killed.launch() == "1.0")
        await killed.stop()
        let again = Upshift(configuration: Fixture.configuration(version: "1.1", directory: directory, server: server))
        #expect(await again.launch() == "1.0")  // the state still says 1.0: recorded again …
        #expect(await again.pendingEvents == 1)  // … with the same id
        server.down = false
        await again.flush()
        #expect(server.types() == ["updated"])
        await again.stop()

        // Another install updating the same way gets another id.
        let otherServer = FakeServer()
        let other = Fixture.directory()
        let before = Upshift(configuration: Fixture.configuration(version: "1.0", directory: other, server: otherServer))
        await before.launch()
        let after = Upshift(configuration: Fixture.configuration(version: "1.1", directory: other, server: otherServer))
        await after.launch()
        await after.flush()
        #expect(otherServer.events.first?["id"] != server.events.first?["id"])
        await before.stop()
        await after.stop()
    }
}
