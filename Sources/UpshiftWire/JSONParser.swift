/// Why a request body is not acceptable JSON, and where: `path` names the member at fault the way
/// field errors do (`notes.de-AT[2]`, `events[3].locale`), or is empty for the document as a whole.
public struct JSONParseError: Error, Equatable, Sendable, CustomStringConvertible {
    public var path: String
    public var message: String
    /// A limit of the caller (`maximumElements`) was reached, rather than the JSON being malformed.
    public var isLimit = false

    public init(path: String, message: String, isLimit: Bool = false) {
        self.path = path
        self.message = message
        self.isLimit = isLimit
    }

    public var description: String { path.isEmpty ? message : "\(path): \(message)" }
}

/// A strict RFC 8259 parser for request bodies. Foundation's parser rounds numbers to `Double`, accepts
/// unpaired surrogate escapes, keeps one of two duplicate keys and recurses without bound; this one
/// keeps numbers as written (``JSONNumber``), refuses text that is not Unicode, refuses duplicate keys,
/// stops at ``maximumDepth`` and names the member at fault. It can also skip a value without building
/// it, which ingestion uses for members it does not read.
public struct JSONParser {
    /// Arrays and objects nested deeper than this are refused (no request needs more than 4).
    public static let maximumDepth = 32

    private let bytes: [UInt8]
    private var index = 0
    private var path: [PathComponent] = []

    private enum PathComponent {
        case key(String)
        case index(Int)
    }

    public init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// Parses a whole document.
    public static func parse(_ bytes: [UInt8]) throws(JSONParseError) -> JSONValue {
        var parser = JSONParser(bytes)
        let value = try parser.value(depth: 0)
        try parser.end()
        return value
    }

    // MARK: Building blocks (for callers that read a document member by member)

    /// After the document's value: only whitespace may follow.
    public mutating func end() throws(JSONParseError) {
        skipWhitespace()
        guard index == bytes.count else { throw error("unexpected text after the JSON value") }
    }

    /// The kind of the next value, without consuming it.
    public mutating func peek() throws(JSONParseError) -> UInt8 {
        skipWhitespace()
        guard index < bytes.count else { throw error("unexpected end of the body") }
        return bytes[index]
    }

    /// Calls `body` with each member's key, the parser placed at its value; `body` must consume the value.
    /// A name twice is an error. Names compare as Swift strings (canonically equivalent spellings are one
    /// name), as the dictionaries they are read into compare them, so no member is silently lost.
    public mutating func members(
        depth: Int, _ body: (inout JSONParser, String) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        try open(UInt8(ascii: "{"), depth: depth)
        var seen = MemberNames()
        if try peek() == UInt8(ascii: "}") {
            index += 1
            return
        }
        while true {
            guard try peek() == UInt8(ascii: "\"") else { throw error("expected a member name in quotes") }
            let key = try string()
            path.append(.key(key))
            guard seen.insert(key) else { throw error("the same member twice") }
            guard try peek() == UInt8(ascii: ":") else { throw error("expected ':' after the member name") }
            index += 1
            try body(&self, key)
            path.removeLast()
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "}"):
                index += 1
                return
            default: throw error("expected ',' or '}' in an object")
            }
        }
    }

    /// Calls `body` with each element's position, the parser placed at the element; `body` must consume it.
    /// More than `maximumElements` elements throw a limit error before the extra one is read.
    public mutating func elements(
        depth: Int, maximumElements: Int = .max, _ body: (inout JSONParser, Int) throws(JSONParseError) -> Void
    ) throws(JSONParseError) {
        try open(UInt8(ascii: "["), depth: depth)
        if try peek() == UInt8(ascii: "]") {
            index += 1
            return
        }
        var position = 0
        while true {
            guard position < maximumElements else {
                var limit = error("more than \(maximumElements) elements")
                limit.isLimit = true
                throw limit
            }
            path.append(.index(position))
            try body(&self, position)
            path.removeLast()
            position += 1
            switch try peek() {
            case UInt8(ascii: ","): index += 1
            case UInt8(ascii: "]"):
                index += 1
                return
            default: throw error("expected ',' or ']' in an array")
            }
        }
    }

    /// The next value, built.
    public mutating func value(depth: Int) throws(JSONParseError) -> JSONValue {
        switch try peek() {
        case UInt8(ascii: "{"):
            var object: [String: JSONValue] = [:]
            try members(depth: depth) { (parser, key) throws(JSONParseError) in
                object[key] = try parser.value(depth: depth + 1)
            }
            return .object(object)
        case UInt8(ascii: "["):
            var array: [JSONValue] = []
            try elements(depth: depth) { (parser, _) throws(JSONParseError) in
                array.append(try parser.value(depth: depth + 1))
            }
            return .array(array)
        case UInt8(ascii: "\""):
            return .string(try string())
        default:
            return try scalar()
        }
    }

    /// Consumes the next value, checking it as strictly as ``value(depth:)`` but building nothing
    /// (only the keys of objects, to refuse duplicates).
    public mutating func skip(depth: Int) throws(JSONParseError) {
        switch try peek() {
        case UInt8(ascii: "{"):
            try members(depth: depth) { (parser, _) throws(JSONParseError) in try parser.skip(depth: depth + 1) }
        case UInt8(ascii: "["):
            try elements(depth: depth) { (parser, _) throws(JSONParseError) in try parser.skip(depth: depth + 1) }
        case UInt8(ascii: "\""):
            try scanString(decoding: false)
        default:
            _ = try scalar()
        }
    }

    // MARK: Values

    private mutating func open(_ bracket: UInt8, depth: Int) throws(JSONParseError) {
        guard try peek() == bracket else {
            throw error(bracket == UInt8(ascii: "{") ? "must be a JSON object" : "must be a JSON array")
        }
        guard depth < Self.maximumDepth else { throw error("nested more than \(Self.maximumDepth) levels deep") }
        index += 1
    }

    /// A number, `true`, `false` or `null`.
    private mutating func scalar() throws(JSONParseError) -> JSONValue {
        let start = index
        for (word, value) in Self.words where bytes[start] == word.first! && bytes[start...].starts(with: word) {
            index += word.count
            return value
        }
        while index < bytes.count, Self.isNumberByte(bytes[index]) { index += 1 }
        guard index > start, let number = JSONNumber(literal: String(decoding: bytes[start..<index], as: UTF8.self))
        else {
            index = start
            throw error("not valid JSON")
        }
        return .number(number)
    }

    private static let words: [([UInt8], JSONValue)] = [
        (Array("true".utf8), .bool(true)), (Array("false".utf8), .bool(false)), (Array("null".utf8), .null),
    ]

    private static func isNumberByte(_ byte: UInt8) -> Bool {
        (byte >= 0x30 && byte <= 0x39) || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "+")
            || byte == UInt8(ascii: ".") || byte == UInt8(ascii: "e") || byte == UInt8(ascii: "E")
    }

    /// A string, decoded.
    public mutating func string() throws(JSONParseError) -> String {
        let start = index + 1
        let decoded = try scanString(decoding: true)
        if let decoded { return String(decoding: decoded, as: UTF8.self) }
        return String(decoding: bytes[start..<(index - 1)], as: UTF8.self)
    }

    /// Scans a string, validating UTF-8 and escapes; raw control characters, invalid UTF-8 and unpaired
    /// surrogate escapes are refused. Returns the decoded bytes when the string holds escapes and
    /// `decoding` is set; nil when the raw bytes between the quotes are the text.
    @discardableResult
    private mutating func scanString(decoding: Bool) throws(JSONParseError) -> [UInt8]? {
        index += 1  // the opening quote
        let start = index
        var decoded: [UInt8]?
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                return decoded
            case UInt8(ascii: "\\"):
                if decoded == nil, decoding { decoded = Array(bytes[start..<index]) }
                try escape(into: &decoded)
            case 0..<0x20:
                throw error("a control character must be escaped inside a string")
            case 0x80...:
                let length = try utf8Sequence()
                decoded?.append(contentsOf: bytes[index..<(index + length)])
                index += length
            default:
                decoded?.append(byte)
                index += 1
            }
        }
        throw error("a string is not closed")
    }

    /// One escape sequence at `index` (the backslash), appended to `decoded` as UTF-8.
    private mutating func escape(into decoded: inout [UInt8]?) throws(JSONParseError) {
        guard index + 1 < bytes.count else { throw error("a string is not closed") }
        let simple: UInt8?
        switch bytes[index + 1] {
        case UInt8(ascii: "\""): simple = UInt8(ascii: "\"")
        case UInt8(ascii: "\\"): simple = UInt8(ascii: "\\")
        case UInt8(ascii: "/"): simple = UInt8(ascii: "/")
        case UInt8(ascii: "b"): simple = 0x08
        case UInt8(ascii: "f"): simple = 0x0C
        case UInt8(ascii: "n"): simple = 0x0A
        case UInt8(ascii: "r"): simple = 0x0D
        case UInt8(ascii: "t"): simple = 0x09
        case UInt8(ascii: "u"): simple = nil
        default: throw error("an unknown escape sequence")
        }
        if let simple {
            decoded?.append(simple)
            index += 2
            return
        }
        var scalar = try hex4(at: index + 2)
        index += 6
        if (0xD800...0xDBFF).contains(scalar) {
            // A high surrogate must be followed by an escaped low one.
            guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
            else { throw error("an unpaired surrogate escape is not Unicode text") }
            let low = try hex4(at: index + 2)
            guard (0xDC00...0xDFFF).contains(low) else { throw error("an unpaired surrogate escape is not Unicode text") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            index += 6
        } else if (0xDC00...0xDFFF).contains(scalar) {
            throw error("an unpaired surrogate escape is not Unicode text")
        }
        if decoded != nil, let unicode = Unicode.Scalar(scalar) {
            decoded?.append(contentsOf: UTF8.encode(unicode)!)
        }
    }

    private func hex4(at start: Int) throws(JSONParseError) -> UInt32 {
        guard start + 4 <= bytes.count else { throw error("a \\u escape needs four hex digits") }
        var value: UInt32 = 0
        for byte in bytes[start..<(start + 4)] {
            guard let digit = UUIDText.nibble(byte) else { throw error("a \\u escape needs four hex digits") }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// The length of the well-formed UTF-8 sequence at `index` (RFC 3629 §4), or an error.
    private func utf8Sequence() throws(JSONParseError) -> Int {
        let first = bytes[index]
        let length: Int
        var secondRange: ClosedRange<UInt8> = 0x80...0xBF
        switch first {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            secondRange = 0xA0...0xBF
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            secondRange = 0x80...0x9F  // no surrogates
        case 0xF0:
            length = 4
            secondRange = 0x90...0xBF
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            secondRange = 0x80...0x8F
        default: throw error("the body is not UTF-8")
        }
        guard index + length <= bytes.count, secondRange.contains(bytes[index + 1]) else {
            throw error("the body is not UTF-8")
        }
        for offset in 2..<length where !(0x80...0xBF).contains(bytes[index + offset]) {
            throw error("the body is not UTF-8")
        }
        return length
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    // MARK: Errors

    /// An error naming the member being read (the enclosing one between members).
    private func error(_ message: String) -> JSONParseError {
        var text = ""
        for component in path {
            switch component {
            case .key(let key): text += text.isEmpty ? key : "." + key
            case .index(let position): text += "[\(position)]"
            }
        }
        return JSONParseError(path: text, message: message)
    }
}

/// The names an object has shown so far: compared one by one while they are few (an event has about ten,
/// and hashing each one cost more than the comparisons), in a set past that.
private struct MemberNames {
    private static let listed = 16
    private var list: [String] = []
    private var set: Set<String>?

    /// False when `name` was seen already.
    mutating func insert(_ name: String) -> Bool {
        if set != nil { return set!.insert(name).inserted }
        if list.contains(name) { return false }
        list.append(name)
        if list.count > Self.listed {
            set = Set(list)
            list = []
        }
        return true
    }
}
