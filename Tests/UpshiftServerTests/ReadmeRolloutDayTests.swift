import Foundation
import Testing
import UpshiftTestSupport

/// README's "A rollout owner's day", run as a newcomer runs it: its shell blocks in order, word for word,
/// against an `upshift serve` of the test's own, with the `upshift` the tests built on `PATH`. The first
/// block only names the environment (the server, the tokens, the database, the CLI), which the test gives
/// its own values. Every `curl` and `upshift` of the other blocks is recorded with its HTTP status or exit
/// code and what it printed, and each is held to what the README says it answers.
@Suite(.serverTimeLimit) struct ReadmeRolloutDayTests {
    static let readme = TestEnvironment.packageRoot.appendingPathComponent("README.md")

    /// The shell blocks of README's section `title`, in order.
    static func shellBlocks(ofSection title: String) throws -> [String] {
        let text = try String(contentsOf: readme, encoding: .utf8)
        let start = try #require(text.range(of: "\n## \(title)\n"), "README has no section \(title)")
        let end = text.range(of: "\n## ", range: start.upperBound..<text.endIndex)?.lowerBound ?? text.endIndex
        var blocks: [String] = []
        var rest = start.upperBound..<end
        while let fence = text.range(of: "\n```sh\n", range: rest) {
            let close = try #require(text.range(of: "\n```\n", range: fence.upperBound..<end), "an unclosed block")
            blocks.append(String(text[fence.upperBound..<close.lowerBound]))
            rest = close.upperBound..<end
        }
        return blocks
    }

    /// One `curl` or `upshift` the blocks ran: its HTTP status (curl) or exit code (upshift), and what it printed.
    struct Step: CustomStringConvertible {
        let command: String
        let status: String
        let output: String
        var description: String { "\(command) -> \(status)\n\(output)" }
    }

    /// Each `curl` and `upshift` records itself in a file of its own, numbered in the order they ran (a
    /// command in a pipeline runs in a subshell, so the count is the folder's). After a CLI command the
    /// script waits 1.5 s: the README says a running server sees a CLI write within about a second.
    static let recorder = #"""
        record() { local file; file="$(printf '%s/%03d' "$README_STEPS" $(( $(ls "$README_STEPS" | wc -l) + 1 )))"; : >"$file"; echo "$file"; }
        curl() {
            local file out rc
            file="$(record)"
            out="$(command curl -w '\n%{http_code}' "$@")"; rc=$?
            printf '%s\n' "${out%$'\n'*}"
            if [ "$rc" -eq 0 ]; then status="${out##*$'\n'}"; else status="exit $rc"; fi
            printf 'curl\n%s\n%s\n' "$status" "${out%$'\n'*}" >"$file"
            return "$rc"
        }
        upshift() {
            local file out rc
            file="$(record)"
            out="$(command upshift "$@" 2>&1)"; rc=$?
            printf '%s\n' "$out"
            printf 'upshift %s %s\n%s\n%s\n' "$1" "$2" "$rc" "$out" >"$file"
            sleep 1.5
            return "$rc"
        }
        """#

    @Test func theRolloutOwnersDayRunsTopToBottomAsWritten() async throws {
        let blocks = try Self.shellBlocks(ofSection: "A rollout owner's day")
        #expect(blocks.count >= 8, "\(blocks)")
        // The first block names what the reader fills in, and nothing else.
        let assigned = Set(blocks[0].split(separator: "\n").flatMap { line in
            line.matches(of: #/(?:^|\s)(?:export )?([A-Z_]+)=/#).map { String($0.output.1) }
        })
        #expect(assigned == ["API", "ADMIN", "READ", "DATABASE_URL", "PATH"], "\(blocks[0])")

        let harness = try await Harness.empty()
        let server = try ServerProcess(database: harness.database, port: try await freePort())
        try await server.start()
        let steps = TestEnvironment.scratch("readme-steps")
        try FileManager.default.createDirectory(at: steps, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: steps) }

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", ([Self.recorder] + blocks.dropFirst()).joined(separator: "\n")]
        var environment = ProcessInfo.processInfo.environment
        environment["API"] = "http://127.0.0.1:\(server.port)"
        environment["ADMIN"] = harness.rootKey
        environment["READ"] = harness.readKey
        environment["DATABASE_URL"] = harness.databaseURL
        environment["PATH"] = try TestEnvironment.binary().deletingLastPathComponent().path + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["USER"] = "dana"
        environment["README_STEPS"] = steps.path
        process.environment = environment
        let printed = try process.runPrinting().printed
        #expect(await server.terminate() == 0)

        let recorded = try FileManager.default.contentsOfDirectory(atPath: steps.path).sorted().map { name in
            let lines = try String(contentsOf: steps.appendingPathComponent(name), encoding: .utf8)
                .split(separator: "\n", maxSplits: 2, omittingEmptySubsequences: false).map(String.init)
            return Step(command: lines[0], status: lines.count > 1 ? lines[1] : "", output: lines.count > 2 ? lines[2] : "")
        }
        // What each command answers, in the README's order: the status or exit code, and text it prints
        // (compared without regard to case, as header names are).
        let expected: [(command: String, status: String, prints: [String])] = [
            ("curl", "201", [#""id":"expenses""#]),
            ("curl", "201", [#"etag: "1""#, #""version":"2.3.0""#]),
            ("upshift releases add", "0", ["added ios 2.4.0 to expenses (revision 1)"]),
            ("curl", "200", [#""action":"soft""#, #""latestVersion":"2.3.0""#, #""priority":0"#, #""stalenessDays":null"#]),
            ("curl", "200", [#"etag: "1""#]),
            ("curl", "200", [#""rolloutPercent":25"#, #"etag: "2""#]),
            ("upshift releases rollout", "0", []),
            ("upshift releases rollout", "0", []),
            ("upshift releases rollout", "0", []),
            ("upshift releases list", "0", ["2.4.0", "25%", "schedule running"]),
            ("curl", "200", [#""changed":"#, #""proposed":"#]),
            ("upshift policy set", "0", ["policy of expenses on ios is now at revision 1"]),
            ("curl", "200", [#""action":"force""#, #""reason":"below_minimum""#, #""minimumVersion":"2.3.0""#]),
            ("curl", "200", [#""type":"policy_replaced""#, #""actor":"cli:dana""#, #""reason":"support is back""#, #""nextBefore":6"#]),
        ]
        #expect(recorded.count == expected.count, "\(recorded)\n\(printed)")
        for (step, want) in zip(recorded, expected) {
            #expect(step.command.hasPrefix(want.command), "\(step)")
            #expect(step.status == want.status, "\(step)")
            for text in want.prints {
                #expect(step.output.lowercased().contains(text.lowercased()), "\(text) in \(step)")
            }
        }
    }
}
