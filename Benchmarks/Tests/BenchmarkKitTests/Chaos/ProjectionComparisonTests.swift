import Testing

@testable import BenchmarkKit

/// Projections against a fresh rebuild, table for table, and the status command the run waits on.
@Suite struct ProjectionComparisonTests {
    @Test func equalTablesInAnotherOrderHold() {
        let comparison = ProjectionComparison(
            incremental: ["install_state": ["{\"a\":1}", "{\"a\":2}"], "adoption_daily": []],
            rebuilt: ["install_state": ["{\"a\":2}", "{\"a\":1}"], "adoption_daily": []])
        #expect(comparison.holds)
        #expect(comparison.tables.map(\.name) == ["adoption_daily", "install_state"])
    }

    @Test func aRowThatDiffersFails() {
        let comparison = ProjectionComparison(
            incremental: ["adoption_daily": ["{\"installs\":3}", "{\"installs\":1}"]],
            rebuilt: ["adoption_daily": ["{\"installs\":2}", "{\"installs\":1}"]])
        #expect(!comparison.holds)
        let table = comparison.tables[0]
        #expect(table.onlyIncremental == 1 && table.onlyRebuilt == 1)
        #expect(table.examples == ["rebuild only: {\"installs\":2}", "incremental only: {\"installs\":3}"])
    }

    /// A row counted twice is not the same as once.
    @Test func aRepeatedRowFails() {
        let comparison = ProjectionComparison(
            incremental: ["prompt_installs": ["{\"x\":1}", "{\"x\":1}"]], rebuilt: ["prompt_installs": ["{\"x\":1}"]])
        #expect(!comparison.holds)
        #expect(comparison.tables[0].onlyIncremental == 1)
    }

    @Test func aTableOnOneSideOnlyFails() {
        #expect(!ProjectionComparison(incremental: ["a": ["1"]], rebuilt: [:]).holds)
        #expect(!ProjectionComparison(incremental: [:], rebuilt: [:]).holds)
    }

    /// As `upshift projections status` prints it.
    static let status = """
        PROJECTION       GEN  VERSION  STATE     CHECKPOINT    EVENTS  LAG_EVENTS  LAG_SECONDS  DEAD_LETTERS
        install_state    1    3        active    1234:56       41000   0           0.0          0
        adoption         2    4        active    1234:56       41000   0           0.0          0
        release_cohorts  1    2        active    1234:50       40990   10          0.4          0
        prompt_funnel    1    1        active    1234:56       41000   0           0.0          0
        prompt_funnel    2    2        building  0:0           0       41000       30.2         0
        """

    @Test func readsTheStatusByItsHeaders() throws {
        let status = try ProjectionStatus(parsing: Self.status)
        #expect(status.generations.count == 5)
        #expect(status.active.map(\.name) == ["install_state", "adoption", "release_cohorts", "prompt_funnel"])
        #expect(status.active[2].lagEvents == 10)
        #expect(!status.caughtUp(expecting: ProjectionTables.names))
        #expect(status.caughtUp(expecting: ["install_state", "adoption", "prompt_funnel"]))
        #expect(!status.caughtUp(expecting: ["install_state", "no_such_projection"]))
    }

    @Test func refusesWhatIsNotTheStatusTable() {
        #expect(throws: BenchParseError.self) {
            try ProjectionStatus(parsing: "no projections yet: `upshift serve` creates them when it starts")
        }
        #expect(throws: BenchParseError.self) {
            try ProjectionStatus(parsing: "PROJECTION GEN STATE EVENTS\ninstall_state 1 active 12")
        }
    }

    @Test func namesTheGenerationTablesOfNoKnownProjection() {
        #expect(ProjectionTables.base(of: "install_state_g12") == "install_state")
        #expect(ProjectionTables.base(of: "event_log") == nil)
        #expect(ProjectionTables.base(of: "event_log_y2026m11") == nil)
        #expect(ProjectionTables.base(of: "odd_g") == nil)
        #expect(
            ProjectionTables.unknown(among: ["install_state_g1", "adoption_daily_g3", "crash_rates_g1", "event_log", "streams"])
                == ["crash_rates_g1"])
    }
}
