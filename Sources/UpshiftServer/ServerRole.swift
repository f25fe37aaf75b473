/// What `upshift serve` does in this process (DESIGN.md section 9).
public enum ServerRole: String, Sendable, CaseIterable {
    /// The HTTP API, the ingestion writer and partition upkeep.
    case http
    /// The projection runner (active on one instance at a time).
    case projections
}
