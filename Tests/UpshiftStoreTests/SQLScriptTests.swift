import Testing
import UpshiftStore

@Suite struct SQLScriptTests {
    @Test func splitsOnSemicolonsOutsideQuotesAndComments() {
        let sql = """
            -- a comment; with a semicolon
            CREATE TABLE a (x text DEFAULT 'semi;colon', "odd;name" int);
            /* block; /* nested; */ still comment; */
            INSERT INTO a VALUES ('it''s; fine', 1);
            SELECT E'back\\'slash;';
            """
        let statements = SQLScript.statements(sql)
        #expect(statements.count == 3)
        #expect(statements[0].hasSuffix(#"CREATE TABLE a (x text DEFAULT 'semi;colon', "odd;name" int)"#))
        #expect(statements[1].hasSuffix("INSERT INTO a VALUES ('it''s; fine', 1)"))
        #expect(statements[2] == #"SELECT E'back\'slash;'"#)
    }

    @Test func keepsDollarQuotedBodiesWhole() {
        let sql = """
            CREATE FUNCTION f() RETURNS int LANGUAGE plpgsql AS $$
            BEGIN
                PERFORM 1; -- inside the body
                RETURN 2;
            END;
            $$;
            CREATE FUNCTION g() RETURNS text LANGUAGE sql AS $body$ SELECT 'a;$$;b' $body$;
            SELECT $1;
            """
        let statements = SQLScript.statements(sql)
        #expect(statements.count == 3)
        #expect(statements[0].contains("RETURN 2;\nEND;\n$$"))
        #expect(statements[1].hasSuffix("$body$ SELECT 'a;$$;b' $body$"))
        #expect(statements[2] == "SELECT $1")
    }

    @Test func dropsStatementsOfOnlyCommentsAndWhitespace() {
        #expect(SQLScript.statements("-- nothing\n;\n /* here */ ; ;").isEmpty)
        #expect(SQLScript.statements("SELECT 1") == ["SELECT 1"])
    }

    @Test func splitsTheProjectsOwnMigrations() throws {
        let migrations = try Migration.load(from: TestPaths.migrations)
        #expect(migrations.first?.name == "0001_event_log.sql")
        let first = SQLScript.statements(migrations[0].sql)
        #expect(first.contains { $0.contains("CREATE FUNCTION upshift_ensure_event_partitions") && $0.hasSuffix("$$") })
    }
}
