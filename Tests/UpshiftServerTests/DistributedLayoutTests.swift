import Foundation
import PostgresNIO
import Testing
import UpshiftStore
import UpshiftTestSupport

/// What a distributed PostgreSQL (Citus) with `app_id` as the distribution column needs of the schema,
/// held against the schema as the migrations and the projections make it (docs/OPERATIONS.md, "Past one
/// primary"), so that the layout cannot rot unnoticed: every table is named as a reference table, a table
/// local to each node, or a distributed one with an `app_id`; every unique index of a distributed table
/// includes `app_id`; no foreign key crosses apps, and no reference table points at a distributed one.
@Suite struct DistributedLayoutTests {
    /// The catalog, keys and sessions: small, read everywhere, copied to every node.
    static let reference: Set<String> = [
        "apps", "api_keys", "dashboard_sessions", "releases", "policies", "rules", "rule_records", "store_sync", "streams",
    ]
    /// The bookkeeping of each node's own feed and runner (transaction ids and snapshots are per node).
    static let local: Set<String> = ["projections", "projection_dead_letters", "log_retention", "schema_migrations"]

    @Test func everyTableFitsTheDistributedLayout() async throws {
        let harness = try await Harness.make()
        // The projections' generation tables exist once their runners have started.
        try await harness.run { _ in try await harness.waitForProjections() }
        let (tables, unique, foreign) = try await harness.sql { client in
            var tables: [String: Bool] = [:]  // table → has an `app_id`
            for try await (name, hasApp) in try await client.query(
                """
                SELECT c.relname, EXISTS (
                    SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'app_id' AND NOT a.attisdropped)
                FROM pg_class c
                WHERE c.relnamespace = 'public'::regnamespace AND c.relkind IN ('r', 'p') AND NOT c.relispartition
                """
            ).decode((String, Bool).self) {
                tables[name] = hasApp
            }
            var unique: [(table: String, index: String)] = []  // unique indexes without `app_id`
            for try await row in try await client.query(
                """
                SELECT c.relname, i.relname
                FROM pg_index x JOIN pg_class c ON c.oid = x.indrelid JOIN pg_class i ON i.oid = x.indexrelid
                WHERE c.relnamespace = 'public'::regnamespace AND x.indisunique AND NOT c.relispartition
                  AND NOT EXISTS (
                      SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'app_id' AND a.attnum = ANY (x.indkey))
                """
            ).decode((String, String).self) {
                unique.append(row)
            }
            var foreign: [(table: String, references: String, sameApp: Bool)] = []
            for try await row in try await client.query(
                """
                SELECT f.conrelid::regclass::text, f.confrelid::regclass::text, EXISTS (
                    SELECT 1 FROM unnest(f.conkey, f.confkey) AS k(own, other)
                    JOIN pg_attribute a ON a.attrelid = f.conrelid AND a.attnum = k.own
                    JOIN pg_attribute b ON b.attrelid = f.confrelid AND b.attnum = k.other
                    WHERE a.attname = 'app_id' AND b.attname = 'app_id')
                FROM pg_constraint f
                WHERE f.contype = 'f' AND f.connamespace = 'public'::regnamespace
                """
            ).decode((String, String, Bool).self) {
                foreign.append(row)
            }
            return (tables, unique, foreign)
        }

        let named = Self.reference.union(Self.local)
        #expect(named.subtracting(tables.keys).isEmpty, "named but not in the schema: \(named.subtracting(tables.keys).sorted())")
        let distributed = Set(tables.filter { $0.value && !named.contains($0.key) }.keys)
        let unplaced = tables.filter { !$0.value && !named.contains($0.key) }.keys.sorted()
        #expect(unplaced.isEmpty, "tables without an app_id that are neither reference nor node-local: \(unplaced)")
        // The log, its ids and every projection's tables are what gets distributed.
        #expect(distributed.isSuperset(of: ["event_log", "event_ids"]), "\(distributed.sorted())")
        #expect(distributed.filter { $0.contains(/_g\d+$/) }.count >= 15, "\(distributed.sorted())")

        let keyless = unique.filter { distributed.contains($0.table) }.map { "\($0.table): \($0.index)" }
        #expect(keyless.isEmpty, "unique indexes of distributed tables without app_id: \(keyless)")
        for key in foreign {
            if distributed.contains(key.table) {
                #expect(key.sameApp, "\(key.table) → \(key.references) does not pair app_id with app_id")
            } else {
                #expect(!distributed.contains(key.references), "reference table \(key.table) points at distributed \(key.references)")
            }
        }
    }
}
