// swift-tools-version:6.1
import PackageDescription

// The benchmarks of DESIGN.md section 10, beside the product as Hummingbird keeps its own: a package of
// their own so that building them never builds the server, and building the server never builds them.
// `scripts/bench` installs the tools, provisions PostgreSQL, builds `upshift` and runs `upshift-bench`.
let package = Package(
    name: "upshift-benchmarks",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "upshift-bench", targets: ["UpshiftBench"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        // What can be checked without running anything: parsers of the tools' outputs, the targets of
        // DESIGN.md section 10, ratios and verdicts, the summary tables.
        .target(name: "BenchmarkKit"),
        // The runs: processes, the database, the output folder.
        .executableTarget(
            name: "UpshiftBench",
            dependencies: [
                "BenchmarkKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        .testTarget(
            name: "BenchmarkKitTests",
            dependencies: ["BenchmarkKit"],
            exclude: ["Recorded"]
        ),
    ]
)
