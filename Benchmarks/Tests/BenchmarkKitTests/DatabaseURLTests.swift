import Testing

@testable import BenchmarkKit

@Suite struct DatabaseURLTests {
    @Test(arguments: [
        ("postgres://postgres@127.0.0.1:54320/upshift", "postgres://postgres@127.0.0.1:54320/upshift_bench"),
        ("postgres://u:p@db:5432/upshift?sslmode=disable&x=/y", "postgres://u:p@db:5432/upshift_bench?sslmode=disable&x=/y"),
    ])
    func namesAnotherDatabaseOnTheSameServer(url: String, expected: String) {
        #expect(DatabaseURL(url).database("upshift_bench").description == expected)
    }
}

@Suite struct DatabaseURLHostTests {
    @Test(arguments: [
        ("postgres://postgres@127.0.0.1:54320/upshift", "postgres://postgres@127.0.0.2:54320/upshift", 54320),
        ("postgres://u:p@w@db:6432/upshift?sslmode=disable", "postgres://u:p@w@127.0.0.2:6432/upshift?sslmode=disable", 6432),
        ("postgresql://db/upshift", "postgresql://127.0.0.2/upshift", 5432),
    ])
    func reachesTheSameServerThroughAnotherAddress(url: String, expected: String, port: Int) {
        #expect(DatabaseURL(url).host("127.0.0.2").description == expected)
        #expect(DatabaseURL(url).port == port)
    }
}
