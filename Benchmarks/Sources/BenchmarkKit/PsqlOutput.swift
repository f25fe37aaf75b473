/// Output of `psql -X -q -A -t` (unaligned, tuples only): one row a line, fields separated by `-F`
/// (`|` by default).
public struct PsqlOutput: Sendable, Equatable {
    public let rows: [[String]]

    public init(parsing output: String, separator: Character = "|") {
        rows = output.split(separator: "\n", omittingEmptySubsequences: true)
            .map { $0.split(separator: separator, omittingEmptySubsequences: false).map(String.init) }
    }

    /// The only value of a one-row, one-column result.
    public static func value(_ output: String) throws(BenchParseError) -> String {
        let rows = PsqlOutput(parsing: output).rows
        guard rows.count == 1, rows[0].count == 1 else {
            throw BenchParseError("psql printed \(rows.count) rows where one value was expected: \(output)")
        }
        return rows[0][0]
    }

    /// The only value, as a whole number.
    public static func integer(_ output: String) throws(BenchParseError) -> Int {
        let text = try value(output)
        guard let number = Int(text) else { throw BenchParseError("psql printed \(text), not a whole number") }
        return number
    }

    /// The only row, as whole numbers (a `-F ' '` row such as "145409 145409").
    public static func integers(_ output: String, separator: Character = " ") throws(BenchParseError) -> [Int] {
        let rows = PsqlOutput(parsing: output, separator: separator).rows
        guard rows.count == 1 else { throw BenchParseError("psql printed \(rows.count) rows where one was expected") }
        var numbers: [Int] = []
        for field in rows[0] {
            guard let number = Int(field) else { throw BenchParseError("psql printed \(field), not a whole number") }
            numbers.append(number)
        }
        return numbers
    }

    /// A literal for a psql meta-command or SQL text: `'it''s'`.
    public static func quoted(_ text: String) -> String {
        "'" + text.replacingOccurrences(of: "'", with: "''") + "'"
    }
}

/// One active projection as `scripts/bench projections` polls it: the events it has applied, and when
/// (PostgreSQL's clock, Unix seconds) the batch that brought it to the whole log ran, nil while behind.
public struct ProjectionProgress: Sendable, Equatable {
    public var name: String
    public var events: Int
    public var caughtUpAt: Double?

    public init(name: String, events: Int, caughtUpAt: Double?) {
        self.name = name
        self.events = events
        self.caughtUpAt = caughtUpAt
    }

    /// Rows "name events caught_up_epoch" (`-F ' '`), caught_up_epoch 0 while behind.
    public static func parse(_ output: String) throws(BenchParseError) -> [ProjectionProgress] {
        var result: [ProjectionProgress] = []
        for row in PsqlOutput(parsing: output, separator: " ").rows {
            guard row.count == 3, let events = Int(row[1]), let epoch = Double(row[2]) else {
                throw BenchParseError("projection progress row \(row.joined(separator: " ")) is not `name events epoch`")
            }
            result.append(ProjectionProgress(name: row[0], events: events, caughtUpAt: epoch == 0 ? nil : epoch))
        }
        return result
    }
}

/// The outputs of the bulk load's psql jobs (`projections-load.sql`): `\gexec` prints "chunk|events" per
/// chunk, `\timing` its "Time: ..." lines.
public enum BulkLoadOutput {
    /// Events the jobs inserted, over all their outputs.
    public static func events(_ outputs: [String]) -> Int {
        outputs.reduce(0) { total, output in
            total + PsqlOutput(parsing: output).rows.reduce(0) { sum, row in
                row.count == 2 ? sum + (Int(row[1]) ?? 0) : sum
            }
        }
    }
}
