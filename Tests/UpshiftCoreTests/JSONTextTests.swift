import Foundation
import Testing
import UpshiftCore

/// What the server writes by hand (`JSONText`, `IngestResponse.json`) is JSON that reads back as written.
@Suite struct JSONTextTests {
    /// Random strings of the characters that must be escaped, of those that pass whole, and of others:
    /// each quoted string, alone and appended after other text, parses back to itself.
    @Test func quotedStringsReadBackAsWritten() throws {
        let pieces: [String] = [
            "a", "Z", "0", " ", "\"", "\\", "/", "\n", "\r", "\t", "\u{0}", "\u{1}", "\u{1F}", "\u{7F}", "é", "e\u{301}",
            "\u{2028}", "\u{FFFD}", "日本", "🙂", "id-1.2.3",
        ]
        var random = SplitMix64(seed: 7)
        for _ in 0..<2_000 {
            let text = (0..<random.int(0...12)).map { _ in pieces[random.int(0...(pieces.count - 1))] }.joined()
            let quoted = JSONText.quoted(text)
            guard case .string(let read) = try JSONParser.parse(Array(quoted.utf8)) else {
                Issue.record("not a string: \(quoted)")
                continue
            }
            #expect(read.unicodeScalars.elementsEqual(text.unicodeScalars), "\(quoted)")
            var document = "[1,"
            JSONText.appendQuoted(text, to: &document)
            document += "]"
            #expect(try JSONParser.parse(Array(document.utf8)) == .array([1, .string(text)]), "\(document)")
        }
    }

    /// An answer of `POST /v1/events`, with ids and messages that need escaping or not, decodes to itself.
    @Test func ingestResponsesDecodeToThemselves() throws {
        let results: [IngestResponse.Result] = [
            .init(index: 0, id: "2f1c6a52-8a7e-4e4a-9a51-1d2b3c4d5e6f", status: .accepted),
            .init(index: 1, id: nil, status: .rejected, error: "missing_field", field: "id", message: "id is required"),
            .init(index: 2, id: "a\"b\\c\nd\u{1}", status: .duplicate, ignored: ["osVerison", "q\"\\\u{1}", "日本"]),
            .init(
                index: 3, id: "日本🙂", status: .rejected, error: "id_conflict", field: "osVersion",
                message: "another event with this id is stored; its osVersion differs (ids are never reused)"),
        ]
        let response = IngestResponse(results: results)
        let decoded = try JSONDecoder().decode(IngestResponse.self, from: Data(response.json.utf8))
        #expect(decoded == response)
        #expect((decoded.accepted, decoded.duplicates, decoded.rejected) == (1, 1, 2))
    }
}
