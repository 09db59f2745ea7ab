public import Foundation
public import Testing

/// The recorded USGS feeds in `../shared/data/usgs` next to the package root.
///
/// They are test data kept outside the repository (public-domain USGS recordings that must not
/// be committed): present on developer machines and in CI, absent in a fresh clone. Tests that
/// read them use ``isAvailable`` in an `.enabled(if:)` trait so they are reported as skipped,
/// with ``skipMessage``, when the folder is missing.
public enum USGSData {
    /// …/Tests/EarthquakesTestData/USGSData.swift → package root → ../shared/data/usgs
    public static let folder: URL = {
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent()  // EarthquakesTestData
            .deletingLastPathComponent()  // Tests
            .deletingLastPathComponent()  // package root
        return packageRoot.deletingLastPathComponent()
            .appendingPathComponent("shared/data/usgs", isDirectory: true)
            .standardizedFileURL
    }()

    public static let fixtures = folder.appendingPathComponent("fixtures", isDirectory: true)

    public static var isAvailable: Bool {
        FileManager.default.fileExists(atPath: folder.appendingPathComponent("2.5_month-2025-10.geojson").path)
    }

    public static let skipMessage: Comment =
        "USGS recordings not found at ../shared/data/usgs (they live outside the repository); skipping"

    /// The recorded feeds and their feature counts (metadata.count) from the folder's README.
    public static let realFeeds: [(file: String, count: Int)] = [
        ("2.5_month-2025-10.geojson", 1349),
        ("all_day-2016-11.geojson", 151),
        ("all_day-2014-04.geojson", 146),
        ("all_week-2013-08.geojson", 1718),
    ]

    public static func data(_ file: String) throws -> Data {
        try Data(contentsOf: folder.appendingPathComponent(file))
    }

    public static func fixture(_ file: String) throws -> Data {
        try Data(contentsOf: fixtures.appendingPathComponent(file))
    }

    /// Every regular file in a folder except README.md, sorted.
    public static func files(in url: URL) -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []
        return names.filter { !$0.hasSuffix(".md") && !$0.hasPrefix(".") && $0 != "fixtures" }.sorted()
    }
}
