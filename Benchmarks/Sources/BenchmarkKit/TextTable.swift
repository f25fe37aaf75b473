/// Fixed-width rows as printf's `%-49s %10s ...` prints them: each cell padded to its column's width
/// (never cut), cells separated by one space.
public struct TextTable: Sendable {
    public enum Alignment: Sendable { case left, right }

    public struct Column: Sendable {
        public let width: Int
        public let alignment: Alignment

        public static func left(_ width: Int) -> Column { Column(width: width, alignment: .left) }
        public static func right(_ width: Int) -> Column { Column(width: width, alignment: .right) }
    }

    public let columns: [Column]

    public init(_ columns: [Column]) {
        self.columns = columns
    }

    /// One row; `cells` has one string per column.
    public func row(_ cells: [String]) -> String {
        precondition(cells.count == columns.count, "a row has \(columns.count) cells, not \(cells.count)")
        return zip(columns, cells).map { column, cell in
            let padding = String(repeating: " ", count: max(0, column.width - cell.count))
            return column.alignment == .left ? cell + padding : padding + cell
        }.joined(separator: " ")
    }
}
