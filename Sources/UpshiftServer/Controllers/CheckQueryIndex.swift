/// The check's query index: a query seen before but for its install id is answered without parsing it
/// again (``CheckAnswerCache``), so the install id is taken out of the query first.
enum CheckQueryIndex {
    /// `a=1&install=…&b=2` → (`a=1&b=2`, the install id as sent). `clean` is false when the query may
    /// name `install` in another way (twice, or a percent-encoded name): then only a full parse answers.
    /// As the query's parameters split at `&` without the empty ones, then joined by `&` again without
    /// `install=…`, in one pass over the bytes (splitting and joining took 5 % of the server's CPU under
    /// checks with an install id each); a query without `install=` is returned as it is.
    static func splitInstall(_ query: String) -> (rest: String, install: Substring?, clean: Bool) {
        let bytes = query.utf8
        let (hasInstall, encodedName) = scan(bytes)
        guard hasInstall else { return (query, nil, !encodedName) }
        var install: Substring?
        var clean = !encodedName
        var rest = ""
        rest.reserveCapacity(bytes.count)
        var partStart = bytes.startIndex
        var index = bytes.startIndex
        while true {
            let atEnd = index == bytes.endIndex
            if atEnd || bytes[index] == UInt8(ascii: "&") {
                if partStart != index {
                    let part = query[partStart..<index]
                    if isInstall(part.utf8) {
                        if install != nil { clean = false }
                        // By bytes: a combining mark after `=` would join it in one Character.
                        install = query[bytes.index(partStart, offsetBy: installPrefix.count)..<index]
                    } else {
                        if !rest.isEmpty { rest += "&" }
                        rest += part
                    }
                }
                if atEnd { break }
                partStart = bytes.index(after: index)
            }
            index = bytes.index(after: index)
        }
        return (rest, install, clean)
    }

    private static let installPrefix = Array("install=".utf8)

    /// Whether a parameter is `install=…`.
    private static func isInstall(_ part: Substring.UTF8View) -> Bool {
        var index = part.startIndex
        for byte in installPrefix {
            guard index != part.endIndex, part[index] == byte else { return false }
            index = part.index(after: index)
        }
        return true
    }

    /// Whether a parameter of the query is `install=…`, and whether a parameter name holds a `%` (it could
    /// decode to `install`): a byte scan without allocation (Foundation's `contains` goes through NSString
    /// and showed in the profile of the check).
    private static func scan(_ bytes: String.UTF8View) -> (hasInstall: Bool, encodedName: Bool) {
        var hasInstall = false
        var encodedName = false
        var inName = true
        var matched = 0  // bytes of `install=` matched from the start of this parameter
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "&"):
                inName = true
                matched = 0
                continue
            case UInt8(ascii: "%") where inName:
                encodedName = true
            case UInt8(ascii: "="):
                inName = false
            default:
                break
            }
            if matched >= 0 {
                if byte == installPrefix[matched] {
                    matched += 1
                    if matched == installPrefix.count {
                        hasInstall = true
                        matched = -1
                    }
                } else {
                    matched = -1
                }
            }
        }
        return (hasInstall, encodedName)
    }
}
