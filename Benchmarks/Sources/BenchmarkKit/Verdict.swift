/// Upshift's figure over its reference's, judged against a target ratio.
public struct Ratio: Sendable, Equatable, CustomStringConvertible {
    /// nil when the reference measured nothing.
    public let value: Double?
    public let target: Target

    public init(_ measured: Double, over reference: Double, target: Target) {
        value = reference > 0 ? measured / reference : nil
        self.target = target
    }

    /// Judged before rounding: 0.8996 misses 0.90 though it prints as 0.90.
    public var isMet: Bool { value.map(target.isMet(by:)) ?? false }

    /// "0.68 PASS" or "n/a MISS".
    public var description: String {
        (value.map { Format.fixed($0, 2) } ?? "n/a") + " " + Verdict.passOrMiss(isMet)
    }
}

/// The words of the summaries for a target met or missed.
public enum Verdict {
    /// The ingest and check summaries: "PASS" or "MISS".
    public static func passOrMiss(_ met: Bool) -> String { met ? "PASS" : "MISS" }

    /// The projections summary: "met" or "MISSED"; a value that was not measured misses.
    public static func metOrMissed(_ value: Double?, _ target: Target) -> String {
        value.map(target.isMet(by:)) == true ? "met" : "MISSED"
    }
}
