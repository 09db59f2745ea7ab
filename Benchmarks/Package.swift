// swift-tools-version: 6.0
// The benchmark program for Baton: Baton against Foundation's OperationQueue, raw GCD and Swift
// concurrency task groups. A nested package so that users of the library never build it.
//
//     swift run -c release --package-path Benchmarks baton-bench            # full run
//     swift run -c release --package-path Benchmarks baton-bench --quick    # under a minute
//     swift run -c release --package-path Benchmarks earthquakes-bench [--quick]
import PackageDescription

let package = Package(
    name: "baton-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Baton", path: "../"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
    ],
    targets: [
        .executableTarget(
            name: "baton-bench",
            dependencies: [
                .product(name: "Baton", package: "Baton"),
                .product(name: "BatonObservability", package: "Baton"),
                .product(name: "BatonDurable", package: "Baton"),
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),
        // Refreshing a 200,000-feature earthquake feed against a Python script (see its main.swift).
        .executableTarget(
            name: "earthquakes-bench",
            dependencies: [.product(name: "EarthquakesKit", package: "Baton")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
