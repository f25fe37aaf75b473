import Foundation

/// Locale tags as apps send them: matched ignoring case, with `_` read as `-` (`de_AT` is `de-AT`).
public enum LocaleTag {
    public static func normalize(_ tag: String) -> String {
        // Tags are ASCII (every input is validated so): one pass over the bytes, on the check's hot path.
        guard tag.utf8.allSatisfy({ $0 < 0x80 }) else { return tag.lowercased().replacingOccurrences(of: "_", with: "-") }
        return String(unsafeUninitializedCapacity: tag.utf8.count) { buffer in
            for (index, byte) in tag.utf8.enumerated() {
                buffer[index] =
                    switch byte {
                    case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte | 0x20
                    case UInt8(ascii: "_"): UInt8(ascii: "-")
                    default: byte
                    }
            }
            return tag.utf8.count
        }
    }

    /// The notes for `locale`: the exact tag, then its language, then the app's default locale, else `[]`.
    public static func notes(_ notes: [String: [String]], locale: String?, defaultLocale: String) -> [String] {
        guard !notes.isEmpty else { return [] }
        var byTag: [String: [String]] = [:]
        for (tag, lines) in notes { byTag[normalize(tag)] = lines }
        var wanted: [String] = []
        if let locale {
            let tag = normalize(locale)
            wanted.append(tag)
            if let language = tag.split(separator: "-").first { wanted.append(String(language)) }
        }
        wanted.append(normalize(defaultLocale))
        for tag in wanted {
            if let lines = byTag[tag] { return lines }
        }
        return []
    }
}
