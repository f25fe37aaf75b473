/// Whether two secrets are equal, in a time that depends on their lengths only, not on where they
/// first differ (a CSRF token, the operator token).
func constantTimeEqual(_ lhs: String, _ rhs: String) -> Bool {
    let (left, right) = (Array(lhs.utf8), Array(rhs.utf8))
    guard left.count == right.count else { return false }
    return zip(left, right).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
}
