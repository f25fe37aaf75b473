import NIOCore

/// Rows for ``StoreConnection/copy(into:columns:rows:logger:)``, written in `COPY`'s text format as they
/// are appended: each field as PostgreSQL reads its type from text (`2026-12-02 10:00:00+00` for a
/// `timestamptz`, a UUID's usual spelling), or nil for `NULL`. Any text may be a field: the format's
/// escapes are applied here.
public struct CopyRows: Sendable {
    /// The fields per row: every row has as many as the columns it is copied into.
    public let width: Int
    private(set) var buffer = ByteBuffer()
    /// The rows appended.
    public private(set) var count = 0

    public init(width: Int) {
        precondition(width > 0, "a row has at least one field")
        self.width = width
    }

    /// Appends one row of `width` fields.
    public mutating func append(_ fields: [String?]) {
        precondition(fields.count == width, "a row of \(fields.count) fields copied into \(width) columns")
        for (index, field) in fields.enumerated() {
            if index > 0 { buffer.writeInteger(UInt8(ascii: "\t")) }
            guard let field else {
                buffer.writeStaticString("\\N")
                continue
            }
            for byte in field.utf8 {
                switch byte {
                case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
                case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
                case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
                case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
                default: buffer.writeInteger(byte)
                }
            }
        }
        buffer.writeInteger(UInt8(ascii: "\n"))
        count += 1
    }

    /// The bytes of the rows appended so far.
    public var bytes: ByteBuffer { buffer }

    /// The bytes of the rows appended so far, in parts of about `size` bytes, each ending with a row.
    func parts(of size: Int) -> [ByteBuffer] {
        var rest = buffer
        var parts: [ByteBuffer] = []
        while rest.readableBytes > size {
            // The end of the row that reaches past `size`: a row's fields hold no raw newline.
            let view = rest.readableBytesView
            guard let newline = view[(view.startIndex + size)...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            parts.append(rest.readSlice(length: newline - view.startIndex + 1)!)
        }
        if rest.readableBytes > 0 { parts.append(rest) }
        return parts
    }
}
