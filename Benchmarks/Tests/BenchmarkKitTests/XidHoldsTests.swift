import Testing

@testable import BenchmarkKit

@Suite struct XidHoldsTests {
    static let output = """
        1795710544.013|4242|80123|INSERT INTO "cohort_versions_g2" (app_id, platform
        1795710544.213|4242|80123|INSERT INTO "cohort_versions_g2" (app_id, platform

        1795710544.415|4242|80123|UPDATE projections SET backfill_steps = $1
        1795710544.415|5151|80130|WITH input AS (
        1795710544.615|4242|80140|INSERT INTO "prompt_versions_g2" (app_id|platform)
        1795710545.017|4242|80140|INSERT INTO "prompt_versions_g2" (app_id|platform)
        not a sample line
        """

    @Test func eachHoldLastsFromItsFirstSampleToItsLast() {
        let holds = XidHold.parse(Self.output)
        #expect(holds.map(\.xid) == ["80140", "80123", "80130"])
        #expect(holds.map { Format.fixed($0.seconds, 3) } == ["0.402", "0.402", "0.000"])
        // The statement when last seen; a `|` inside it is kept.
        #expect(holds[1].query == "UPDATE projections SET backfill_steps = $1")
        #expect(holds[0].query == #"INSERT INTO "prompt_versions_g2" (app_id|platform)"#)
    }

    @Test func theLongestHoldOfAWindowIsTheOneThatOverlapsIt() {
        let holds = XidHold.parse(Self.output)
        #expect(XidHold.longest(holds, from: 1795710544.5, to: 1795710546)?.xid == "80140")
        #expect(XidHold.longest(holds, from: 1795710544.0, to: 1795710544.3)?.xid == "80123")
        #expect(XidHold.longest(holds, from: 1795710600, to: 1795710700) == nil)
    }
}
