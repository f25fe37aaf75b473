import Foundation

extension CatalogInput {
    /// Typed access to the fields of a JSON object, each failure naming its field.
    struct Fields {
        let object: [String: JSONValue]

        init(_ body: JSONValue, allowed: Set<String>) throws(FieldError) {
            guard let object = body.objectValue else { throw FieldError("body", "must be a JSON object") }
            if let unknown = object.keys.sorted().first(where: { !allowed.contains($0) }) {
                throw FieldError(unknown, "unknown field")
            }
            self.object = object
        }

        func has(_ key: String) -> Bool { object[key] != nil }

        private func value(_ key: String) -> JSONValue? {
            guard let value = object[key], !value.isNull else { return nil }
            return value
        }

        /// A non-empty string of at most `maximumLength` scalars without control characters.
        func string(_ key: String, required: Bool, maximumLength: Int = 200) throws(FieldError) -> String? {
            guard let value = value(key) else {
                if required { throw FieldError(key, "is required") }
                return nil
            }
            guard let text = value.stringValue else { throw FieldError(key, "must be a string") }
            try CatalogInput.checkText(text, field: key, maximumLength: maximumLength, lineBreaks: false)
            return text
        }

        func version(_ key: String, required: Bool) throws(FieldError) -> Version? {
            guard let text = try string(key, required: required, maximumLength: Version.maximumLength) else { return nil }
            guard let version = Version(text) else { throw FieldError(key, "not a valid version: \(text)") }
            return version
        }

        func locale(_ key: String) throws(FieldError) -> String? {
            guard let text = try string(key, required: false, maximumLength: EventValidator.maximumLocaleLength) else {
                return nil
            }
            guard EventValidator.isLocale(text) else { throw FieldError(key, "not a locale tag: \(text)") }
            return text
        }

        func date(_ key: String) throws(FieldError) -> Date? {
            guard let text = try string(key, required: false, maximumLength: 40) else { return nil }
            guard let date = Timestamp.parse(text) else { throw FieldError(key, "not an RFC 3339 timestamp") }
            return date
        }

        func bool(_ key: String) throws(FieldError) -> Bool? {
            guard let value = value(key) else { return nil }
            guard case .bool(let flag) = value else { throw FieldError(key, "must be true or false") }
            return flag
        }

        /// A number that is exactly a decimal of at most `places` digits after the point, in `range`
        /// (``JSONNumber/value(in:places:)``): never rounded to the nearest value the field can hold.
        func decimal(_ key: String, in range: ClosedRange<Int>, places: Int) throws(FieldError) -> Double? {
            guard let value = value(key) else { return nil }
            guard case .number(let number) = value, let result = number.value(in: range, places: places) else {
                let step = "0." + String(repeating: "0", count: places - 1) + "1"
                throw FieldError(key, "must be a number from \(range.lowerBound) to \(range.upperBound) in steps of \(step)")
            }
            return result
        }

        /// A number that is exactly an integer in `range` (`1.0` and `1e2` are integers; `1.5` is not).
        func integer(_ key: String, in range: ClosedRange<Int>) throws(FieldError) -> Int? {
            guard let value = value(key) else { return nil }
            guard case .number(let number) = value, let result = number.integer(in: range) else {
                throw FieldError(key, "must be an integer from \(range.lowerBound) to \(range.upperBound)")
            }
            return result
        }

        func array(_ key: String) throws(FieldError) -> [JSONValue]? {
            guard let value = value(key) else { return nil }
            guard case .array(let items) = value else { throw FieldError(key, "must be an array") }
            return items
        }

        func platformMap(
            _ key: String, validate: (String, String) throws(FieldError) -> Void
        ) throws(FieldError) -> [Platform: String] {
            guard let value = value(key) else { return [:] }
            guard let object = value.objectValue else { throw FieldError(key, "must be an object of platform → value") }
            var result: [Platform: String] = [:]
            for (name, entry) in object.sorted(by: { $0.key < $1.key }) {
                let field = "\(key).\(name)"
                let platform = try Platform(name, field: field)
                guard let text = entry.stringValue else { throw FieldError(field, "must be a string") }
                try validate(field, text)
                result[platform] = text
            }
            return result
        }

        /// `{locale: [line, …]}` with locale tags read as the check matches them, ignoring case and `_`/`-`
        /// (docs/OPERATIONS.md, "Limits").
        func notes(_ key: String) throws(FieldError) -> [String: [String]]? {
            guard let value = value(key) else { return nil }
            guard let object = value.objectValue else { throw FieldError(key, "must be an object of locale → lines") }
            var notes: [String: [String]] = [:]
            var seen: Set<String> = []
            for (locale, lines) in object.sorted(by: { $0.key < $1.key }) {
                guard EventValidator.isLocale(locale) else { throw FieldError("\(key).\(locale)", "unknown locale format") }
                guard seen.insert(LocaleTag.normalize(locale)).inserted else {
                    throw FieldError(
                        "\(key).\(locale)", "the same locale twice (tags match ignoring case and _/-)", kind: .inconsistent)
                }
                guard case .array(let items) = lines, items.count <= maximumNoteLines else {
                    throw FieldError("\(key).\(locale)", "must be an array of at most \(maximumNoteLines) strings")
                }
                notes[locale] = try items.enumerated().map { (index, item) throws(FieldError) in
                    let field = "\(key).\(locale)[\(index)]"
                    guard let line = item.stringValue else { throw FieldError(field, "must be a string") }
                    try CatalogInput.checkText(line, field: field, maximumLength: maximumNoteLength, lineBreaks: true, allowEmpty: true)
                    return line
                }
            }
            return notes
        }
    }
}
