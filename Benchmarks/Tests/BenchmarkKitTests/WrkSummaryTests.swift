import Testing

@testable import BenchmarkKit

@Suite struct WrkSummaryTests {
    @Test func readsTheFiguresOfEventsLua() throws {
        let run = try EventsRun(WrkSummary(parsing: Recorded.text("ingest/b-wrk.txt")))
        #expect(run.requestsPerSecond == 247.1)
        #expect(run.events.perSecond == 24706.6)
        #expect(run.latency == Latency(p50: 57.72, p95: 128.83, p99: 159.21, max: 199.71))
        #expect(run.non2xx == 0)
        #expect(run.statuses == "200:3725")
        #expect(run.socketErrors == SocketErrors())
        #expect(run.events.accepted == 372_500)
        #expect(run.events.notAccepted == 0)
        #expect(run.unmatched == 0)
        #expect(run.unanswered == 16)
        #expect(run.samples.isEmpty)
    }

    @Test func readsTheFiguresOfCheckLua() throws {
        let run = try CheckRun(WrkSummary(parsing: Recorded.text("check/d-wrk.txt")))
        #expect(run.requestsPerSecond == 10965.4)
        #expect(run.latency.p50 == 5.31)
        #expect(run.latency.p99 == 17.0)
        #expect(run.sent == 164_952)
        #expect(run.answered2xx == 164_921)
        #expect(run.inFlight == 31)
        #expect(run.bytesPerAnswer == 1653)
        #expect(run.socketErrors.compact == "0")
    }

    /// wrk's own report above the summary mentions the same figures in other units; only the script's
    /// lines count, and a key printed twice keeps its last value.
    @Test func onlyTheScriptsLinesCountAndTheLastValueWins() throws {
        let output = """
            Running 3s test @ http://127.0.0.1:18080/v1/events
            Requests/sec:   5668.78
            upshift-bench: requests_per_s=1.0
            upshift-bench: responses_2xx=3
            upshift-bench: requests_per_s=2.5
            """
        let summary = try WrkSummary(parsing: output)
        #expect(try summary.number("requests_per_s") == 2.5)
        #expect(summary.values.count == 2)
    }

    @Test func keepsTheSamplesOfAnswersThatWereNotWanted() throws {
        let output = """
            upshift-bench: responses_2xx=10
            upshift-bench: responses_non_2xx=2
            upshift-bench: socket_errors=connect:0,read:3,write:0,timeout:1
            upshift-bench: non_2xx_sample status=503 body={"type":"about:blank","status":503}
            upshift-bench: rejected_sample body={"accepted":19,"duplicates":0,"rejected":1}
            """
        let summary = try WrkSummary(parsing: output)
        #expect(summary.non2xxSamples == [#"status=503 body={"type":"about:blank","status":503}"#])
        #expect(summary.sampleBodies == [
            #"status=503 body={"type":"about:blank","status":503}"#,
            #"body={"accepted":19,"duplicates":0,"rejected":1}"#,
        ])
        let errors = try SocketErrors(parsing: summary.text("socket_errors"))
        #expect(errors == SocketErrors(read: 3, timeout: 1))
        #expect(errors.compact == "connect:0,read:3,write:0,timeout:1")
    }

    /// A script that failed in `init()` leaves wrk's report without a summary: the run did not measure.
    @Test func refusesAnOutputWithoutTheSummary() {
        let output = """
            Running 15s test @ http://127.0.0.1:18080/v1/events
            PANIC: unprotected error in call to Lua API (events.lua:37: set UPSHIFT_BENCH_KEY to an ingest key)
            """
        #expect(throws: BenchParseError.self) { try WrkSummary(parsing: output) }
    }

    @Test func refusesAFigureThatIsNotANumber() throws {
        let summary = try WrkSummary(parsing: "upshift-bench: responses_2xx=1\nupshift-bench: requests_per_s=nan?\n")
        #expect(throws: BenchParseError.self) { try summary.number("requests_per_s") }
        #expect(throws: BenchParseError.self) { try summary.integer("responses_non_2xx") }
    }
}
