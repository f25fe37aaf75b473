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
