import Testing

@testable import BenchmarkKit

@Suite struct PsqlOutputTests {
    @Test func readsOneValue() throws {
        #expect(try PsqlOutput.value("15.18 (Debian 15.18-0+deb12u1)\n") == "15.18 (Debian 15.18-0+deb12u1)")
        #expect(try PsqlOutput.integer("374100\n") == 374_100)
    }

    @Test func refusesMoreOrLessThanOneValue() {
        #expect(throws: BenchParseError.self) { try PsqlOutput.value("") }
        #expect(throws: BenchParseError.self) { try PsqlOutput.value("a\nb\n") }
        #expect(throws: BenchParseError.self) { try PsqlOutput.value("a|b\n") }
        #expect(throws: BenchParseError.self) { try PsqlOutput.integer("on\n") }
    }

    /// `-F ' '`: the counts of case (b) and of case (d).
    @Test func readsARowOfNumbers() throws {
        #expect(try PsqlOutput.integers("374100 1600 0\n") == [374_100, 1600, 0])
        #expect(throws: BenchParseError.self) { try PsqlOutput.integers("374100 x\n") }
    }

    @Test func keepsEmptyFields() {
        #expect(PsqlOutput(parsing: "a||c\n\nd|e|\n").rows == [["a", "", "c"], ["d", "e", ""]])
    }

    @Test func quotesLiterals() {
        #expect(PsqlOutput.quoted("/work/.bench/b-unanswered.txt") == "'/work/.bench/b-unanswered.txt'")
        #expect(PsqlOutput.quoted("it's") == "'it''s'")
    }

    @Test func readsProjectionProgress() throws {
        let output = """
            adoption 200011 1764001234.567891
            install_state 150000 0
            prompt_funnel 200011 1764001230
            """
        #expect(try ProjectionProgress.parse(output) == [
            ProjectionProgress(name: "adoption", events: 200_011, caughtUpAt: 1_764_001_234.567891),
            ProjectionProgress(name: "install_state", events: 150_000, caughtUpAt: nil),
            ProjectionProgress(name: "prompt_funnel", events: 200_011, caughtUpAt: 1_764_001_230),
        ])
        #expect(try ProjectionProgress.parse("") == [])
        #expect(throws: BenchParseError.self) { try ProjectionProgress.parse("adoption many 0\n") }
    }
}
