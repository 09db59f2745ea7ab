// swift-tools-version: 6.1
import PackageDescription

let strict: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "Baton",
    // macOS 14 and its siblings: the durable worker and the PostgreSQL store run their children in discarding
    // task groups (structured, and nothing accumulates for a long-running service).
    platforms: [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10)],
    products: [
        .library(name: "Baton", targets: ["Baton"]),
        .library(name: "BatonTesting", targets: ["BatonTesting"]),
        .library(name: "BatonNetworking", targets: ["BatonNetworking"]),
        .library(name: "BatonObservability", targets: ["BatonObservability"]),
        .library(name: "EarthquakesKit", targets: ["EarthquakesKit"]),
        .library(name: "BatonDurable", targets: ["BatonDurable"]),
        .executable(name: "earthquakes", targets: ["earthquakes"]),
        // See and repair the runs of a job store (SQLite or PostgreSQL) from a shell.
        .executable(name: "baton", targets: ["baton"]),
        // Durable job graphs on PostgreSQL: its own product so that users of the core never build postgres-nio.
        .library(name: "BatonPostgres", targets: ["BatonPostgres"]),
        // The PostgreSQL store's chaos harness and benchmark (`bench`), to run against a server of your own.
        // A product also so that the benchmark package builds it with its own release build (CI compiles
        // the server stack once in release, not twice).
        .executable(name: "baton-postgres-chaos", targets: ["baton-postgres-chaos"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.6.0"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-metrics.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-distributed-tracing.git", from: "1.7.3"),
        // Documentation only: `swift package generate-documentation` (DocC catalogs of every library).
        .package(url: "https://github.com/swiftlang/swift-docc-plugin.git", from: "1.5.0"),
        // Tests only: a real HTTP server on 127.0.0.1 (TestHTTPServer).
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        // EarthquakesKit on Linux only: feed downloads (URLSession there keeps a core busy while bytes trickle).
        .package(url: "https://github.com/swift-server/async-http-client.git", from: "1.37.0"),
        // NIOHTTPCompression: the error a download's decompression limit throws (AsyncHTTPClient uses it).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // BatonPostgres only.
        .package(url: "https://github.com/vapor/postgres-nio.git", from: "1.33.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.29.0"),
        // The `baton dashboard` web server only (BatonDashboard).
        // Without its ConfigurationSupport trait: the dashboard reads no swift-configuration, and that package
        // would add 20,000 lines to every build.
        .package(
            url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1", traits: ["FullFoundation"]),
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
        // Durable job graphs: the JobStore protocol, the worker, and the embedded SQLite store.
        .target(
            name: "BatonDurable",
            dependencies: [
                "Baton",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                // The tracing API only (protocols, no backend, no other package): the submitter's
                // context is stored with a run and each attempt gets a span.
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                // JobTimeline and JobMetrics see a worker's claims, lost leases and retries
                // (DurableWorker+Observability.swift); API packages only, no backend.
                "BatonObservability",
                .product(name: "CoreMetrics", package: "swift-metrics"),
            ],
            swiftSettings: strict
        ),
        // The checks every JobStore must pass (SQLite here, PostgreSQL in its own tests). Tests only.
        .target(
            name: "JobStoreConformance", dependencies: ["BatonDurable", "Baton", "BatonTesting"],
            path: "Tests/JobStoreConformance",
            swiftSettings: strict
        ),
        .target(name: "BatonNetworking", dependencies: ["Baton"], swiftSettings: strict),
        // Metrics (swift-metrics), traces (swift-distributed-tracing) and a timeline of every job.
        .target(
            name: "BatonObservability",
            dependencies: [
                "Baton",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "EarthquakesKit",
            dependencies: [
                "Baton", "BatonNetworking", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client", condition: .when(platforms: [.linux])),
                .product(
                    name: "NIOHTTPCompression", package: "swift-nio-extras", condition: .when(platforms: [.linux])),
            ],
            swiftSettings: strict
        ),
        // The logic of the `earthquakes` tool, kept out of the executable so tests can call it.
        .target(
            name: "EarthquakesCLI",
            dependencies: [
                "Baton", "BatonDurable", "BatonNetworking", "BatonObservability", "EarthquakesKit",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "earthquakes",
            dependencies: [
                "EarthquakesCLI", "EarthquakesKit",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "BatonCLI",
            dependencies: [
                "BatonDurable", "BatonPostgres", "BatonObservability", .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        // The web dashboard of `baton dashboard`: server-rendered pages of a job store's runs, on Hummingbird.
        .target(
            name: "BatonDashboard",
            dependencies: [
                "BatonCLI", "BatonDurable", "BatonObservability", .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .executableTarget(
            name: "baton",
            dependencies: [
                "BatonCLI", "BatonDashboard", "BatonDurable", "BatonObservability",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict
        ),
        .target(
            name: "BatonPostgres",
            dependencies: [
                "Baton",
                "BatonDurable",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BatonPostgresTests",
            dependencies: [
                "BatonPostgres", "BatonDurable", "JobStoreConformance", "Baton", "BatonTesting",
                "baton-postgres-chaos",
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        // The chaos test of BatonPostgres: worker processes killed at random, a server restart; and its benchmark.
        .executableTarget(
            name: "baton-postgres-chaos",
            dependencies: [
                "BatonPostgres", "BatonDurable", "Baton", "BatonTesting",
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/PostgresChaos",
            swiftSettings: strict
        ),
        .testTarget(name: "BatonTests", dependencies: ["Baton", "BatonTesting"], swiftSettings: strict),
        // Every Swift block of the README and the DocC articles, compiled (and some run).
        .testTarget(
            name: "DocumentationTests",
            dependencies: [
                "Baton", "BatonTesting", "BatonNetworking", "BatonObservability", "BatonDurable", "BatonPostgres",
                "EarthquakesKit",
                .product(name: "CoreMetrics", package: "swift-metrics"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BatonObservabilityTests",
            dependencies: [
                "BatonObservability", "Baton", "BatonTesting", "BatonDurable", "JobStoreConformance",
                .product(name: "MetricsTestKit", package: "swift-metrics"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ],
            swiftSettings: strict
        ),
        .testTarget(name: "BatonStressTests", dependencies: ["Baton", "BatonTesting"], swiftSettings: strict),
        // The worker process that the crash test starts and kills. Tests only.
        .executableTarget(
            name: "durable-crash-worker",
            dependencies: ["BatonDurable", .product(name: "GRDB", package: "GRDB.swift")],
            path: "Tests/DurableCrashWorker", swiftSettings: strict
        ),
        .testTarget(
            name: "BatonDurableTests",
            dependencies: [
                "BatonDurable", "JobStoreConformance", "Baton", "BatonTesting", "durable-crash-worker",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EarthquakesKitTests",
            dependencies: [
                "EarthquakesKit", "Baton", "BatonTesting", "EarthquakesTestData",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
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
            name: "BatonCLITests",
            dependencies: [
                "Baton", "BatonCLI", "BatonDurable", "BatonObservability", "BatonPostgres", "BatonTesting", "baton",
                .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "BatonDashboardTests",
            dependencies: [
                "Baton", "BatonCLI", "BatonDashboard", "BatonDurable", "BatonPostgres", "BatonTesting",
                .product(name: "GRDB", package: "GRDB.swift"), .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
            ],
            swiftSettings: strict
        ),
        .testTarget(
            name: "EarthquakesToolTests",
            dependencies: [
                "EarthquakesCLI", "EarthquakesKit", "Baton", "BatonDurable", "BatonNetworking", "BatonObservability",
                "BatonTesting", "TestHTTPServer", "EarthquakesTestData", .product(name: "GRDB", package: "GRDB.swift"),
            ],
            swiftSettings: strict
        ),
    ],
    swiftLanguageModes: [.v6]
)
