import Foundation
import Testing
import UpshiftCore

/// `../shared/testdata/decisions.json`, decoded as it is: scenarios of a catalog, a policy, the server
/// clock and checks with the fields their answers must carry; and rollout bucket cases.
public struct DecisionCases: Decodable, Sendable {
    public var scenarios: [Scenario]
    public var buckets: Buckets

    public struct Scenario: Decodable, Sendable {
        public var name: String
        public var now: String
        public var app: App
        public var releases: [JSONValue]
        public var policy: JSONValue
        public var checks: [Check]
    }

    public struct App: Decodable, Sendable {
        public var id: String
        public var defaultLocale: String
        public var updateURL: [String: String]
    }

    public struct Check: Decodable, Sendable {
        public var request: [String: String]
        public var expect: [String: JSONValue]
    }

    public struct Buckets: Decodable, Sendable {
        public var cases: [[JSONValue]]
    }

    public static func load() throws -> DecisionCases {
        try JSONDecoder().decode(DecisionCases.self, from: try SharedTestData.file("decisions.json"))
    }
}

/// A scenario named as the file names it, when a test takes the scenarios as its arguments.
extension DecisionCases.Scenario: CustomTestStringConvertible {
    public var testDescription: String { name }
}
