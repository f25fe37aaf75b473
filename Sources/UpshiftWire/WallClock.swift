import Foundation

/// The application's one clock (docs/ARCHITECTURE.md, "The clock"). Core never reads it; the composition
/// root passes the system clock in production, and tests or the simulator pass one they control.
public protocol WallClock: Sendable {
    func now() -> Date
}

/// The system's clock: production, and the device's clock in the SDK.
public struct SystemClock: WallClock {
    public init() {}
    public func now() -> Date { Date() }
}
