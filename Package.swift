// swift-tools-version:6.1
import PackageDescription

let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]

let testSwiftSettings: [SwiftSetting] = [.enableUpcomingFeature("ExistentialAny")]

let package = Package(
    name: "upshift",
    // The SDK (UpshiftClient) runs on every Apple platform at these minimums; the server needs macOS 15 or Linux.
    platforms: [.macOS(.v15), .iOS(.v17), .macCatalyst(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)],
    // One product, the SDK. SwiftPM resolves the package dependencies of every library product of a
    // package an app depends on, so any other library here (the server's, Core's with swift-crypto) would
    // pin packages in the app's Package.resolved; with UpshiftClient alone (Foundation and UpshiftWire) it
    // pins none (SampleTests resolves a throwaway app package to prove it). The `upshift` executable
    // target is built by name (`swift build --product upshift`).
    products: [
        .library(name: "UpshiftClient", targets: ["UpshiftClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "3.12.3"),
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.8.0"),
        .package(url: "https://github.com/adam-fowler/compress-nio.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
    ],
    targets: [
        // What apps and the server exchange (decisions, notes, event types, versions, JSON): Foundation only.
        .target(
            name: "UpshiftWire",
            swiftSettings: swiftSettings
        ),
        .target(
            name: "UpshiftCore",
            dependencies: ["UpshiftWire", .product(name: "Crypto", package: "swift-crypto")],
            swiftSettings: swiftSettings
        ),
        // The SDK for apps: the wire types and Foundation only, so an app resolves none of the server's packages.
        .target(
            name: "UpshiftClient",
            dependencies: ["UpshiftWire"],
            // Apple's privacy manifest: what the SDK collects and why (App Store submissions read it).
            resources: [.copy("PrivacyInfo.xcprivacy")],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "UpshiftStore",
            dependencies: [
                "UpshiftCore",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["EmbedFiles"]  // the migrations of sql/
        ),
        // Files of the repository compiled into the binary (sql/, docs/openapi.yaml): it runs from any folder.
        // Its command is scripts/embed-files.
        .plugin(name: "EmbedFiles", capability: .buildTool(), path: "Sources/EmbedFilesPlugin"),
        .target(
            name: "UpshiftServer",
            dependencies: [
                "UpshiftCore",
                "UpshiftStore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "CompressNIO", package: "compress-nio"),
                // The App Store lookup of `releases import` and the store sync.
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "NIOHTTPTypesHTTP1", package: "swift-nio-extras"),
            ],
            swiftSettings: swiftSettings,
            plugins: ["EmbedFiles"]  // docs/openapi.yaml
        ),
        // The fleet simulation and its ground truth (`upshift simulate`, `upshift demo`): part of no product.
        .target(
            name: "UpshiftSimulation",
            dependencies: [
                "UpshiftClient",
                "UpshiftCore",
                "UpshiftStore",
                "UpshiftServer",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "CompressNIO", package: "compress-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "upshift",
            dependencies: [
                "UpshiftCore",
                "UpshiftStore",
                "UpshiftServer",
                "UpshiftSimulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "UpshiftCoreTests",
            dependencies: ["UpshiftCore", "UpshiftTestData"],
            swiftSettings: testSwiftSettings
        ),
        // The SDK on its own, as an app has it: this target imports UpshiftClient and nothing of the server.
        .testTarget(
            name: "UpshiftClientTests",
            dependencies: ["UpshiftClient"],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "UpshiftStoreTests",
            dependencies: [
                "UpshiftCore",
                "UpshiftStore",
                "UpshiftTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .testTarget(
            name: "UpshiftServerTests",
            dependencies: [
                "UpshiftClient",
                "UpshiftCore",
                "UpshiftStore",
                "UpshiftServer",
                "UpshiftSimulation",
                "UpshiftTestData",
                "UpshiftTestSupport",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: testSwiftSettings
        ),
        .target(
            name: "UpshiftTestData",
            dependencies: ["UpshiftCore"],
            path: "Tests/UpshiftTestData",
            swiftSettings: testSwiftSettings
        ),
        .target(
            name: "UpshiftTestSupport",
            dependencies: [
                "UpshiftCore",
                "UpshiftStore",
                "UpshiftTestData",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
            ],
            path: "Tests/UpshiftTestSupport",
            swiftSettings: testSwiftSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
