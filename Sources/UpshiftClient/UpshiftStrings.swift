import Foundation

/// The texts of the update screens, English by default; an app sets its own (translated) table.
/// `{version}` in a text is replaced with the version offered.
public struct UpshiftStrings: Sendable, Equatable {
    public var softTitle = "Update available"
    public var softMessage = "Version {version} is available."
    public var blockingTitle = "Update required"
    public var blockingMessage = "This version is no longer supported. Update to version {version} to continue."
    public var update = "Update"
    public var later = "Later"
    public var skip = "Skip this version"
    public var whatsNewTitle = "What's New"
    public var done = "Continue"

    public static let english = UpshiftStrings()

    public init() {}

    /// `text` with `{version}` replaced.
    public func fill(_ text: String, version: String) -> String {
        text.replacingOccurrences(of: "{version}", with: version)
    }
}
