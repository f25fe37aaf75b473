extension Platform {
    /// The platform `text` names, or the field error `field` gets for it.
    public init(_ text: String, field: String = "platform") throws(FieldError) {
        guard let platform = Platform(validating: text) else { throw FieldError(field, Self.problem(with: text)) }
        self = platform
    }
}
