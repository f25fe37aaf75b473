import Logging
import NIOCore
import PostgresNIO

/// Rows read from a cursor, column by column, as PostgreSQL sent them (binary), to be written back as
/// one array per column (`unnest`) without decoding a value: a backfill's rows go from its read to its
/// writes unchanged.
struct RowBatch: Sendable {
    /// One array per column, each of the column's type.
    var columns: [CellArray]
    var count: Int

    /// The arrays as binds, separated by commas: `unnest(\(batch.arrays))`.
    var arrays: SQL { SQL.joined(columns.map { "\($0)" }, separator: ", ") }

    /// The rows whose `column` is (or is not) NULL.
    func rows(whereNull column: Int, _ isNull: Bool) -> RowBatch {
        let kept = (0..<count).filter { columns[column].isNull(row: $0) == isNull }
        return RowBatch(columns: columns.map { $0.rows(kept) }, count: kept.count)
    }

    /// Appends the rows of `other`, of the same columns.
    mutating func append(_ other: RowBatch) {
        if columns.isEmpty {
            self = other
            return
        }
        for index in columns.indices { columns[index].append(contentsOf: other.columns[index]) }
        count += other.count
    }

    /// Up to `limit` rows of the cursor `cursor` (a name this code chose). `arrayTypes` caches the array
    /// type of each element type seen.
    static func fetch(
        _ limit: Int, from cursor: String, arrayTypes: inout [UInt32: UInt32], on connection: StoreConnection, logger: Logger
    ) async throws -> RowBatch {
        let rows = try await connection.query(SQL(trustedText: "FETCH FORWARD \(limit) FROM \(cursor)"), logger: logger)
        var cells: [CellArray] = []
        var count = 0
        for try await row in rows {
            if cells.isEmpty {
                // (Each array type is set below, once looked up.)
                for cell in row { cells.append(CellArray(element: cell.dataType, array: cell.dataType)) }
            }
            for (index, cell) in row.enumerated() { cells[index].append(cell.bytes) }
            count += 1
        }
        let unknown = Set(cells.map(\.element.rawValue)).subtracting(arrayTypes.keys)
        if !unknown.isEmpty {
            let lookup = try await connection.query(
                "SELECT oid::int8, typarray::int8 FROM pg_type WHERE oid = ANY(\(unknown.map { Int64($0) })::int8[]::oid[])",
                logger: logger)
            for try await (element, array) in lookup.decode((Int64, Int64).self) where array != 0 {
                arrayTypes[UInt32(element)] = UInt32(array)
            }
        }
        var columns: [CellArray] = []
        for var column in cells {
            guard let array = arrayTypes[column.element.rawValue] else { throw NoArrayType(element: column.element.rawValue) }
            column.array = PostgresDataType(array)
            columns.append(column)
        }
        return RowBatch(columns: columns, count: count)
    }
}

/// A column of a backfill's read whose type PostgreSQL has no array type for.
struct NoArrayType: Error, CustomStringConvertible {
    var element: UInt32
    var description: String { "a backfill column of type \(element) has no array type" }
}

/// A one-dimensional array of values of one type, each as PostgreSQL's binary format has it, bound in
/// binary as the array type. The values are copied into one buffer as they come, each as the array's
/// binary format writes an element: its length (-1: NULL), then its bytes.
struct CellArray: PostgresDynamicTypeEncodable, Sendable {
    let element: PostgresDataType
    var array: PostgresDataType
    private var elements = ByteBuffer()
    private var starts: [Int] = []
    private var nulls = 0

    init(element: PostgresDataType, array: PostgresDataType) {
        self.element = element
        self.array = array
    }

    var count: Int { starts.count }

    mutating func append(_ cell: ByteBuffer?) {
        starts.append(elements.writerIndex)
        if let cell {
            elements.writeInteger(Int32(cell.readableBytes))
            elements.writeImmutableBuffer(cell)
        } else {
            elements.writeInteger(Int32(-1))
            nulls += 1
        }
    }

    mutating func append(contentsOf other: CellArray) {
        for row in 0..<other.count { append(other.value(row: row)) }
    }

    func isNull(row: Int) -> Bool { elements.getInteger(at: starts[row], as: Int32.self) == -1 }

    /// The value of `row`, nil for NULL.
    func value(row: Int) -> ByteBuffer? {
        guard let length = elements.getInteger(at: starts[row], as: Int32.self), length >= 0 else { return nil }
        return elements.getSlice(at: starts[row] + 4, length: Int(length))
    }

    /// The values of `rows`, in that order.
    func rows(_ rows: [Int]) -> CellArray {
        var kept = CellArray(element: element, array: array)
        for row in rows { kept.append(value(row: row)) }
        return kept
    }

    var psqlType: PostgresDataType { array }
    var psqlFormat: PostgresFormat { .binary }

    func encode<JSONEncoder: PostgresJSONEncoder>(into buffer: inout ByteBuffer, context: PostgresEncodingContext<JSONEncoder>) {
        // array_recv: dimensions, has-nulls flag, element type; per dimension its length and lower bound;
        // then the elements.
        buffer.writeInteger(Int32(starts.isEmpty ? 0 : 1))
        buffer.writeInteger(Int32(nulls > 0 ? 1 : 0))
        buffer.writeInteger(element.rawValue)
        guard !starts.isEmpty else { return }
        buffer.writeInteger(Int32(starts.count))
        buffer.writeInteger(Int32(1))
        buffer.writeImmutableBuffer(elements)
    }
}
