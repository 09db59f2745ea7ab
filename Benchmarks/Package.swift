// swift-tools-version: 6.0
// The benchmark program for Baton: Baton against Foundation's OperationQueue, raw GCD and Swift
// concurrency task groups. A nested package so that users of the library never build it.
//
//     swift run -c release --package-path Benchmarks baton-bench            # full run
//     swift run -c release --package-path Benchmarks baton-bench --quick    # under a minute
import PackageDescription

let package = Package(
    name: "baton-benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "Baton", path: "../"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
    ],
    targets: [
        .executableTarget(
            name: "baton-bench",
            dependencies: [
                .product(name: "Baton", package: "Baton"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        )
    ],
    swiftLanguageModes: [.v6]
)
