/// Splits a SQL file into statements, since PostgresNIO sends one statement per query.
///
/// A `;` ends a statement only outside quotes and comments: `'…'` (with `''`), `E'…'` (with `\'`),
/// `"…"`, `$tag$…$tag$` bodies, `-- …` line comments and nested `/* … */` block comments.
/// Statements that hold only whitespace and comments are dropped.
public enum SQLScript {
    public static func statements(_ sql: String) -> [String] {
        let chars = Array(sql.unicodeScalars)
        var statements: [String] = []
        var current = String.UnicodeScalarView()
        var hasCode = false
        var index = 0

        func append(_ range: Range<Int>) {
            current.append(contentsOf: chars[range])
        }
        func finish() {
            let text = String(current).trimmingWhitespace()
            if hasCode, !text.isEmpty { statements.append(text) }
            current = String.UnicodeScalarView()
            hasCode = false
        }

        while index < chars.count {
            let char = chars[index]
            let next: Unicode.Scalar? = index + 1 < chars.count ? chars[index + 1] : nil
            switch char {
            case "-" where next == "-":
                let end = chars[index...].firstIndex(of: "\n").map { $0 + 1 } ?? chars.count
                append(index..<end)
                index = end
            case "/" where next == "*":
                var depth = 0
                var cursor = index
                while cursor < chars.count {
                    if chars[cursor] == "/", cursor + 1 < chars.count, chars[cursor + 1] == "*" {
                        depth += 1
                        cursor += 2
                    } else if chars[cursor] == "*", cursor + 1 < chars.count, chars[cursor + 1] == "/" {
                        depth -= 1
                        cursor += 2
                        if depth == 0 { break }
                    } else {
                        cursor += 1
                    }
                }
                append(index..<cursor)
                index = cursor
            case "'", "\"":
                let escapes = char == "'" && index > 0 && (chars[index - 1] == "E" || chars[index - 1] == "e")
                    && (index < 2 || !isIdentifierPart(chars[index - 2]))
                let end = quotedEnd(chars, from: index, quote: char, backslashEscapes: escapes)
                append(index..<end)
                hasCode = true
                index = end
            case "$":
                if let tagEnd = dollarTagEnd(chars, from: index), index == 0 || !isIdentifierPart(chars[index - 1]) {
                    let tag = Array(chars[index..<tagEnd])
                    var cursor = tagEnd
                    var end = chars.count
                    while cursor + tag.count <= chars.count {
                        if chars[cursor] == "$", Array(chars[cursor..<(cursor + tag.count)]) == tag {
                            end = cursor + tag.count
                            break
                        }
                        cursor += 1
                    }
                    append(index..<end)
                    hasCode = true
                    index = end
                } else {
                    current.append(char)
                    hasCode = true
                    index += 1
                }
            case ";":
                finish()
                index += 1
            default:
                current.append(char)
                if !char.properties.isWhitespace { hasCode = true }
                index += 1
            }
        }
        finish()
        return statements
    }

    /// The index after the closing quote (or the end of the text when unterminated).
    private static func quotedEnd(
        _ chars: [Unicode.Scalar], from start: Int, quote: Unicode.Scalar, backslashEscapes: Bool
    ) -> Int {
        var cursor = start + 1
        while cursor < chars.count {
            if backslashEscapes, chars[cursor] == "\\" {
                cursor += 2
                continue
            }
            if chars[cursor] == quote {
                if cursor + 1 < chars.count, chars[cursor + 1] == quote {
                    cursor += 2  // doubled quote
                    continue
                }
                return cursor + 1
            }
            cursor += 1
        }
        return chars.count
    }

    /// For `$tag$` or `$$` starting at `start`, the index after the opening tag; nil for `$1` and the like.
    private static func dollarTagEnd(_ chars: [Unicode.Scalar], from start: Int) -> Int? {
        var cursor = start + 1
        while cursor < chars.count {
            let char = chars[cursor]
            if char == "$" { return cursor + 1 }
            let isTagChar = char == "_" || char.properties.isAlphabetic || (cursor > start + 1 && ("0"..."9").contains(char))
            guard isTagChar else { return nil }
            cursor += 1
        }
        return nil
    }

    private static func isIdentifierPart(_ char: Unicode.Scalar) -> Bool {
        char == "_" || char == "$" || char.properties.isAlphabetic || ("0"..."9").contains(char)
    }
}

extension String {
    func trimmingWhitespace() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }),
            let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })
        else { return "" }
        return String(scalars[first...last])
    }
}
