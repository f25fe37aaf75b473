/// A release channel (docs/ARCHITECTURE.md, "What the catalog holds"): `live` sees live releases, `beta`
/// sees beta and live ones.
public enum Channel: String, Sendable, Codable, CaseIterable {
    case live, beta
}
