/// A JSON number as it was written, so that no value is rounded, clamped or truncated before the field
/// that reads it decides what it accepts (docs/ARCHITECTURE.md, "Reading input": nothing is clamped,
/// rounded or truncated).
///
/// Its exact value is kept as a decimal (sign, significant digits, power of ten): `1.0`, `1e2` and `-0`
/// are the integers 1, 100 and 0, as JSON Schema reads them, while `1.5`, `1e400` and a 400-digit
/// integer are in no integer field's range.
public struct JSONNumber: Sendable, Equatable, CustomStringConvertible {
    /// The text as written, or as Swift prints a number built in code.
    public let literal: String
    /// The exact value, nil when `literal` is not a JSON number (a non-finite `Double` built in code).
    private let decimal: Decimal?

    /// value = (negative ? -1 : 1) × digits × 10^exponent, `digits` without leading or trailing zeros
    /// (empty for zero). Exponents are saturated far beyond any range a field has.
    private struct Decimal: Equatable {
        var negative: Bool
        var digits: [UInt8]
        var exponent: Int

        /// How many places left of the decimal point the most significant digit sits.
        var magnitude: Int { digits.count + exponent }
    }

    private static let exponentLimit = 1_000_000_000

    /// Parses the JSON number grammar (RFC 8259 §6) and nothing else: no `+`, no leading zeros, no `.5`.
    public init?(literal: String) {
        guard let decimal = Self.parse(Array(literal.utf8)) else { return nil }
        self.literal = literal
        self.decimal = decimal
    }

    /// A number for a value built in code (a CLI flag, a form, a stored catalog).
    public init(_ value: Int) {
        self.init(literal: String(value))!
    }

    /// A number for a value built in code; a non-finite value is in no field's range.
    public init(_ value: Double) {
        let text = value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : "\(value)"
        literal = text
        decimal = value.isFinite ? Self.parse(Array(text.utf8)) : nil
    }

    public var description: String { literal }

    /// Exact equality of values: `1`, `1.0` and `10e-1` are equal.
    public static func == (lhs: JSONNumber, rhs: JSONNumber) -> Bool {
        lhs.decimal == rhs.decimal && (lhs.decimal != nil || lhs.literal == rhs.literal)
    }

    /// The value as an `Int` when it is exactly an integer inside `range`; nil otherwise.
    public func integer(in range: ClosedRange<Int>) -> Int? {
        guard let decimal, decimal.exponent >= 0, decimal.magnitude <= 19 else { return nil }
        var value = 0
        for digit in decimal.digits {
            let (times, overflowTimes) = value.multipliedReportingOverflow(by: 10)
            let (sum, overflowSum) = times.addingReportingOverflow(Int(digit))
            guard !overflowTimes, !overflowSum else { return nil }
            value = sum
        }
        for _ in 0..<decimal.exponent {
            let (times, overflow) = value.multipliedReportingOverflow(by: 10)
            guard !overflow else { return nil }
            value = times
        }
        if decimal.negative { value = -value }
        return range.contains(value) ? value : nil
    }

    /// The value when it is exactly a decimal of at most `places` digits after the point inside `range`
    /// (`12.5`, `1.25e1` and `12.50` are 12.5); nil otherwise, `1e-400` and `0.005` (for 2 places)
    /// included: such a value is refused, never rounded to one the field can hold.
    ///
    /// Within these bounds the `Double` returned is the one nearest the decimal, and prints back as
    /// exactly that decimal (at most 15 significant digits survive the round trip), so what is stored
    /// and answered is what was sent.
    public func value(in range: ClosedRange<Int>, places: Int) -> Double? {
        guard let decimal, decimal.exponent >= -places, decimal.magnitude <= 15 - places,
            Self.compare(decimal, range.lowerBound) >= 0, Self.compare(decimal, range.upperBound) <= 0
        else { return nil }
        var text = decimal.negative ? "-" : ""
        text += decimal.digits.isEmpty ? "0" : decimal.digits.map { String($0) }.joined()
        text += "e\(decimal.exponent)"
        guard let value = Double(text), value.isFinite else { return nil }
        return value == 0 ? 0 : value  // `-0` is 0
    }

    /// The value as the nearest `Double` (for numbers built in code and read back); nil when not finite.
    public var doubleValue: Double? {
        guard decimal != nil, let value = Double(literal), value.isFinite else { return nil }
        return value
    }

    // MARK: Exact arithmetic

    /// -1, 0 or 1 as `decimal` is below, equal to or above `bound`.
    private static func compare(_ decimal: Decimal, _ bound: Int) -> Int {
        let other = parse(Array(String(bound).utf8))!
        let sign = decimal.digits.isEmpty ? 0 : decimal.negative ? -1 : 1
        let otherSign = other.digits.isEmpty ? 0 : other.negative ? -1 : 1
        if sign != otherSign { return sign < otherSign ? -1 : 1 }
        if sign == 0 { return 0 }
        let magnitudeOrder: Int
        if decimal.magnitude != other.magnitude {
            magnitudeOrder = decimal.magnitude < other.magnitude ? -1 : 1
        } else {
            magnitudeOrder = compareDigits(decimal.digits, other.digits)
        }
        return sign > 0 ? magnitudeOrder : -magnitudeOrder
    }

    /// Digit strings aligned at their first digit, the shorter padded with zeros.
    private static func compareDigits(_ lhs: [UInt8], _ rhs: [UInt8]) -> Int {
        for index in 0..<max(lhs.count, rhs.count) {
            let a = index < lhs.count ? lhs[index] : 0
            let b = index < rhs.count ? rhs[index] : 0
            if a != b { return a < b ? -1 : 1 }
        }
        return 0
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?` into its exact decimal value.
    private static func parse(_ bytes: [UInt8]) -> Decimal? {
        var index = 0
        func isDigit(_ at: Int) -> Bool { at < bytes.count && bytes[at] >= 0x30 && bytes[at] <= 0x39 }
        var negative = false
        if index < bytes.count, bytes[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard isDigit(index) else { return nil }
        var digits: [UInt8] = []
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while isDigit(index) {
                digits.append(bytes[index] - 0x30)
                index += 1
            }
        }
        var exponent = 0
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard isDigit(index) else { return nil }
            while isDigit(index) {
                digits.append(bytes[index] - 0x30)
                exponent -= 1
                index += 1
            }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            var exponentNegative = false
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                exponentNegative = bytes[index] == UInt8(ascii: "-")
                index += 1
            }
            guard isDigit(index) else { return nil }
            var written = 0
            while isDigit(index) {
                written = min(written * 10 + Int(bytes[index] - 0x30), exponentLimit)
                index += 1
            }
            exponent += exponentNegative ? -written : written
        }
        guard index == bytes.count else { return nil }
        // Leading zeros (from `0.00…`) carry no value; trailing zeros move into the exponent.
        let leading = digits.prefix { $0 == 0 }.count
        digits.removeFirst(leading)
        while let last = digits.last, last == 0 {
            digits.removeLast()
            exponent += 1
        }
        if digits.isEmpty { return Decimal(negative: false, digits: [], exponent: 0) }
        return Decimal(negative: negative, digits: digits, exponent: max(-exponentLimit, min(exponentLimit, exponent)))
    }
}

extension JSONNumber: ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral {
    public init(integerLiteral value: Int) {
        self.init(value)
    }

    public init(floatLiteral value: Double) {
        self.init(value)
    }
}
