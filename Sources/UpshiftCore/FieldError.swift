/// A request field that is missing or wrong, named so that the API can say which.
public struct FieldError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A field that breaks its own rule (`400`), or one that is valid alone but contradicts another
    /// field or the stored value (`422`: `minimumOSVersion` above `maximumOSVersion`), or one that names
    /// what is no longer kept (`410`: an export cursor before events retention dropped).
    public enum Kind: Sendable {
        case invalid, inconsistent, gone
    }

    public var field: String
    public var message: String
    public var kind: Kind

    public init(_ field: String, _ message: String, kind: Kind = .invalid) {
        self.field = field
        self.message = message
        self.kind = kind
    }

    /// The error of a request body that is not acceptable JSON, naming the member at fault.
    public init(_ error: JSONParseError) {
        self.init(error.path.isEmpty ? "body" : error.path, error.message)
    }

    /// The same error for a field inside `prefix` (`policy.minimumVersion`, `rolloutSchedule[1].percent`);
    /// an error about the whole body names the prefix itself.
    public func inside(_ prefix: String) -> FieldError {
        FieldError(field == "body" ? prefix : "\(prefix).\(field)", message, kind: kind)
    }

    public var description: String { "\(field): \(message)" }
}
