/// A release channel (DESIGN.md section 4): `live` sees live releases, `beta` sees beta and live ones.
public enum Channel: String, Sendable, Codable, CaseIterable {
    case live, beta
}
