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
        #expect(second.stepError == "injected failure")
        #expect(second.updatedFrom == "1.0")
        let third = await launch("1.3")  // 1.2 again, then 1.3; 1.4 is not out for this app version
        #expect(third.stepsRun == ["1.2", "1.3"])
        #expect(third.stepFailed == nil && third.stepInterrupted == nil)
        #expect(third.stepError == nil)
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

    /// An install of 1.0 updated to 2.0 (build 7) whose step 2.0 the process dies in (here: a step that
    /// never returns, and its SDK is dropped), three times, then a fourth launch of it: its report, and the
    /// hanging launches, to be cancelled when the test is done with the directory (a cancelled step
    /// writes its failure, which no crashed process does).
    static func crashThreeTimes(
        in directory: URL, started: Lines
    ) async throws -> (report: LaunchReport, hanging: [Task<LaunchReport, Never>]) {
        let version = "2.0"
        try await Fixture.installed(version: "1.0", in: directory)
        let hangs = MigrationStep(version: "2.0") {
            started.append("2.0")
            try await Task.sleep(for: .seconds(3600))
        }
        let before = started.lines.count
        var launches: [Task<LaunchReport, Never>] = []
        for attempt in 1...3 {
            let sdk = Upshift(configuration: Fixture.configuration(version: version, directory: directory))
            launches.append(Task { await sdk.launch(migrations: [hangs], baseline: .freshInstall) })
            // Wait until the step runs, then leave it hanging, as a crashed process would.
            while started.lines.count < before + attempt { try await Task.sleep(for: .milliseconds(10)) }
            await sdk.stop()
        }
        let sdk = Upshift(configuration: Fixture.configuration(version: version, directory: directory))
        let report = await sdk.launch(migrations: [hangs], baseline: .freshInstall)
        await sdk.stop()
        return (report, launches)
    }

    /// A step the process dies in is reported as interrupted at the next launch, started again, and
    /// abandoned after three attempts.
    @Test func aStepThatKeepsCrashingIsAbandonedAfterThreeAttempts() async throws {
        let started = Lines()
        let (last, hanging) = try await Self.crashThreeTimes(in: Fixture.directory(), started: started)
        #expect(started.lines.count == 3)
        #expect(last.stepAbandoned == "2.0")
        #expect(last.stepInterrupted == "2.0")
        #expect(last.stepsRun.isEmpty)
        for launch in hanging { launch.cancel() }
    }

    /// Abandoned by one app version and build, not for ever: the next build, or the next version, which
    /// may fix the step, tries it again.
    @Test func aStepAbandonedByOneBuildIsTriedAgainByTheNext() async throws {
        for next in [("2.0", 8), ("2.1", 7)] {
            let directory = Fixture.directory()
            let (abandoned, hanging) = try await Self.crashThreeTimes(in: directory, started: Lines())
            #expect(abandoned.stepAbandoned == "2.0")

            let ran = Lines()
            var configuration = Fixture.configuration(version: next.0, directory: directory)
            configuration.build = next.1
            let fixed = Upshift(configuration: configuration)
            let report = await fixed.launch(migrations: Self.steps(["2.0", "2.1"], ran: ran), baseline: .freshInstall)
            #expect(report.stepAbandoned == nil, "\(next)")
            #expect(report.stepInterrupted == "2.0", "\(next)")
            #expect(report.stepsRun == (next.0 == "2.1" ? ["2.0", "2.1"] : ["2.0"]), "\(next)")
            await fixed.stop()
            for launch in hanging { launch.cancel() }
        }
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
