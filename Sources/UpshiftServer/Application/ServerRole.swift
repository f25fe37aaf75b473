/// What `upshift serve` does in this process (docs/OPERATIONS.md, "Deployment: instances behind a load
/// balancer").
public enum ServerRole: String, Sendable, CaseIterable {
    /// The HTTP API, the ingestion writer and partition upkeep.
    case http
    /// The projection runner (active on one instance at a time).
    case projections
}
