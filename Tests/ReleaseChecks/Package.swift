// swift-tools-version: 6.0
// The misuse exit tests (Tests/BatonTests/MisuseTests.swift, linked here) built with optimisation: the
// messages that name the misused job must survive -O. A nested package so that the release build
// compiles Baton and these tests only, not every product of the main package.
//
//     swift test -c release --package-path Tests/ReleaseChecks
import PackageDescription

let package = Package(
    name: "baton-release-checks",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "Baton", path: "../..")],
    targets: [
        .testTarget(
            name: "MisuseReleaseTests",
            dependencies: [.product(name: "Baton", package: "Baton")],
            path: "MisuseReleaseTests"
        )
    ]
)
