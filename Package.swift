// swift-tools-version: 6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Baton",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9)],
    products: [
        .library(name: "Baton", targets: ["Baton"]),
        .library(name: "BatonTesting", targets: ["BatonTesting"]),
        .library(name: "BatonNetworking", targets: ["BatonNetworking"]),
        .library(name: "EarthquakesKit", targets: ["EarthquakesKit"]),
        .executable(name: "earthquakes", targets: ["earthquakes"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        // Tests only: a real HTTP server on 127.0.0.1 (TestHTTPServer).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
    ],
    targets: [
        .target(
            name: "Baton",
            dependencies: [
                .product(name: "DequeModule", package: "swift-collections"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .target(name: "BatonTesting", dependencies: ["Baton"], swiftSettings: strict),
        .target(name: "BatonNetworking", dependencies: ["Baton"], swiftSettings: strict),
        .target(
            name: "EarthquakesKit",
            dependencies: ["Baton", "BatonNetworking", .product(name: "GRDB", package: "GRDB.swift")],
            swiftSettings: strict
        ),
        // The logic of the `earthquakes` tool, kept out of the executable so tests can call it.
        .target(
            name: "EarthquakesCLI", dependencies: ["Baton", "BatonNetworking", "EarthquakesKit"], swiftSettings: strict
        ),
        .executableTarget(
            name: "earthquakes",
            dependencies: [
                "EarthquakesCLI",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "BatonTests", dependencies: ["Baton", "BatonTesting"], swiftSettings: strict),
        .testTarget(name: "BatonStressTests", dependencies: ["Baton", "BatonTesting"], swiftSettings: strict),
        .testTarget(
            name: "EarthquakesKitTests",
            dependencies: ["EarthquakesKit", "Baton", "BatonTesting", "EarthquakesTestData"],
            swiftSettings: strict
        ),
        // Where the recorded USGS feeds are (../shared/data, absent in a user's clone). Tests only.
        .target(name: "EarthquakesTestData", path: "Tests/EarthquakesTestData", swiftSettings: strict),
        // An HTTP/1.1 server on 127.0.0.1 for tests, with scripted stalls and partial bodies. Not a product.
        .target(
            name: "TestHTTPServer",
            dependencies: [
                "BatonTesting",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Tests/TestHTTPServer",
            swiftSettings: strict
        ),
        .testTarget(
            name: "BatonNetworkingTests",
            dependencies: ["BatonNetworking", "BatonTesting", "TestHTTPServer"],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EarthquakesToolTests",
            dependencies: [
                "EarthquakesCLI", "EarthquakesKit", "BatonNetworking", "BatonTesting", "TestHTTPServer",
                "EarthquakesTestData",
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
