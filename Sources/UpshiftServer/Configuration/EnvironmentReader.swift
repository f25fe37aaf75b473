import Foundation
import UpshiftCore

/// Reads typed values from the environment; a value that does not parse, or lies outside its range,
/// is an error naming the variable.
struct EnvironmentReader {
    let environment: [String: String]

    init(_ environment: [String: String]) {
        self.environment = environment
    }

    private func value(_ name: String) -> String? {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespaces), !text.isEmpty else { return nil }
        return text
    }

    func text(_ name: String) throws -> String? {
        guard let text = value(name) else { return nil }
        guard TextRules.violation(in: text, lineBreaks: false) == nil, text.utf8.count <= 255 else {
            throw ConfigurationError.invalid(name, text)
        }
        return text
    }

    func integer(_ name: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = TextRules.integer(text, in: range) else {
            throw ConfigurationError.invalid(name, text, expected: "an integer from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    func decimal(_ name: String, in range: ClosedRange<Double>) throws -> Double? {
        guard let text = value(name) else { return nil }
        guard let number = Double(text), number.isFinite, range.contains(number) else {
            throw ConfigurationError.invalid(
                name, text, expected: "a number from \(range.lowerBound.formatted()) to \(range.upperBound.formatted())")
        }
        return number
    }

    /// A switch: `1`, `true` or `yes` is on; `0`, `false` or `no` is off (any case).
    func flag(_ name: String) throws -> Bool? {
        guard let text = value(name) else { return nil }
        switch text.lowercased() {
        case "1", "true", "yes": return true
        case "0", "false", "no": return false
        default: throw ConfigurationError.invalid(name, text, expected: "1, true or yes; 0, false or no")
        }
    }

    /// Seconds, a decimal from 0.001 to 86,400.
    func seconds(_ name: String) throws -> Duration? {
        guard let seconds = try decimal(name, in: 0.001...86_400) else { return nil }
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String

    public static func invalid(_ name: String, _ value: String, expected: String? = nil) -> ConfigurationError {
        ConfigurationError(description: "\(name) has an invalid value: \(value)" + (expected.map { " (expected \($0))" } ?? ""))
    }
}
