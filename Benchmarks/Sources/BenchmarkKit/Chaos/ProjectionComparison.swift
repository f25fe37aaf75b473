/// Every projection equals a fresh rebuild, table for table: the rows the server's runners
/// built incrementally through the faults, against the rows `upshift projections rebuild` builds from the
/// whole log afterwards. Rows are compared as a multiset of their JSON text (`row_to_json`), so order does
/// not matter and a row twice is not the same as once.
public struct ProjectionComparison: Sendable, Equatable {
    public struct Table: Sendable, Equatable {
        public let name: String
        public let incrementalRows: Int
        public let rebuiltRows: Int
        /// Rows the incremental table holds more often than the rebuilt one (counted with repetition).
        public let onlyIncremental: Int
        /// Rows the rebuilt table holds more often than the incremental one.
        public let onlyRebuilt: Int
        /// A few of the differing rows, to print.
        public let examples: [String]

        public var isEqual: Bool { onlyIncremental == 0 && onlyRebuilt == 0 }
    }

    /// In name order; a table on one side only is compared with no rows.
    public let tables: [Table]

    /// `incremental` and `rebuilt`: rows by table name.
    public init(incremental: [String: [String]], rebuilt: [String: [String]]) {
        let names = Set(incremental.keys).union(rebuilt.keys).sorted()
        tables = names.map { name in
            Self.compare(name, incremental[name] ?? [], rebuilt[name] ?? [])
        }
    }

    static func compare(_ name: String, _ incremental: [String], _ rebuilt: [String]) -> Table {
        var balance: [String: Int] = [:]
        for row in incremental { balance[row, default: 0] += 1 }
        for row in rebuilt { balance[row, default: 0] -= 1 }
        let onlyIncremental = balance.values.filter { $0 > 0 }.reduce(0, +)
        let onlyRebuilt = -balance.values.filter { $0 < 0 }.reduce(0, +)
        let examples = balance.filter { $0.value != 0 }.keys.sorted().prefix(3).map { row in
            (balance[row]! > 0 ? "incremental only: " : "rebuild only: ") + row
        }
        return Table(
            name: name, incrementalRows: incremental.count, rebuiltRows: rebuilt.count, onlyIncremental: onlyIncremental,
            onlyRebuilt: onlyRebuilt, examples: examples)
    }

    public var holds: Bool { !tables.isEmpty && tables.allSatisfy(\.isEqual) }
}

/// `upshift projections status`: the table it prints, one row per projection generation.
public struct ProjectionStatus: Sendable, Equatable {
    public struct Generation: Sendable, Equatable {
        public var name: String
        public var generation: Int
        public var state: String
        public var events: Int
        public var lagEvents: Int
    }

    public let generations: [Generation]

    /// Reads the columns by their headers (PROJECTION, GEN, STATE, EVENTS, LAG_EVENTS), so that a column
    /// added to the command does not break it.
    public init(parsing text: String) throws {
        let lines = text.split(separator: "\n").map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        guard let header = lines.first, header.first == "PROJECTION" else {
            throw BenchParseError("projections status: no header line in \(text.prefix(200))")
        }
        func column(_ name: String) throws -> Int {
            guard let index = header.firstIndex(of: name) else { throw BenchParseError("projections status: no column \(name)") }
            return index
        }
        let name = try column("PROJECTION"), generation = try column("GEN"), state = try column("STATE")
        let events = try column("EVENTS"), lag = try column("LAG_EVENTS")
        generations = try lines.dropFirst().map { cells in
            guard cells.count == header.count, let gen = Int(cells[generation]), let applied = Int(cells[events]),
                  let lagEvents = Int(cells[lag])
            else { throw BenchParseError("projections status: cannot read the line \(cells.joined(separator: " "))") }
            return Generation(name: cells[name], generation: gen, state: cells[state], events: applied, lagEvents: lagEvents)
        }
    }

    public var active: [Generation] { generations.filter { $0.state == "active" } }

    /// Every projection has an active generation that has applied the whole log.
    public func caughtUp(expecting names: [String]) -> Bool {
        names.allSatisfy { name in active.contains { $0.name == name && $0.lagEvents == 0 } }
    }
}

/// Projections and the base names of their tables (`<base>_g<generation>`), as UpshiftStore defines them
/// (`ProjectionDefinition.tables`). The run refuses a database holding a generation table of another base
/// name, so that a table added to a projection cannot go uncompared.
public enum ProjectionTables {
    public static let byProjection: [(name: String, tables: [String])] = [
        ("install_state", ["install_state", "install_activity", "install_activity_daily"]),
        ("adoption", ["install_days", "adoption_daily", "health_daily", "adoption_horizons"]),
        ("release_cohorts", ["release_cohorts", "release_installs", "release_updates", "cohort_versions"]),
        ("prompt_funnel", ["prompt_installs", "prompt_summary", "prompt_versions", "prompt_updates"]),
        ("release_health", ["health_versions", "health_cohorts"]),
    ]

    public static var names: [String] { byProjection.map(\.name) }

    /// The base of a generation table's name ("install_state" of "install_state_g12"), or nil for
    /// another table.
    public static func base(of table: String) -> String? {
        guard let range = table.range(of: "_g", options: .backwards), !table[range.upperBound...].isEmpty,
              table[range.upperBound...].allSatisfy(\.isNumber)
        else { return nil }
        return String(table[..<range.lowerBound])
    }

    /// Generation tables of a base name no projection here lists.
    public static func unknown(among tables: [String]) -> [String] {
        let known = Set(byProjection.flatMap(\.tables))
        return tables.filter { base(of: $0).map { !known.contains($0) } ?? false }.sorted()
    }
}
