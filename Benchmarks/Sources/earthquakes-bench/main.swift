// Refreshing a big earthquake feed: the `earthquakes` import path (GetEarthquakes on a file: read,
// parse, import in one transaction) against a ten-line Python script (json.load + executemany, standard
// library only), on the same generated file, each in a child process of its own so that its peak
// memory is its own. Prints one JSON line per measurement and the ratios; asserts nothing.
//
//     swift run -c release --package-path Benchmarks earthquakes-bench            # 200,000 features
//     swift run -c release --package-path Benchmarks earthquakes-bench --quick    # 20,000 features
//
// The feed replicates real USGS features from ../shared/data/usgs (new ids: "<id>r<k>"); without that
// folder it replicates the built-in sample feed and says so.
import EarthquakesKit
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

let arguments = CommandLine.arguments

/// Peak resident memory of this process, in MB.
func peakRSSMegabytes() -> Double {
    var usage = rusage()
    #if canImport(Darwin)
    getrusage(RUSAGE_SELF, &usage)
    #else
    getrusage(RUSAGE_SELF.rawValue, &usage)
    #endif
    #if canImport(Darwin)
    return Double(usage.ru_maxrss) / 1_048_576
    #else
    return Double(usage.ru_maxrss) / 1024
    #endif
}

// MARK: Child: one Swift import

if arguments.count == 4, arguments[1] == "--import-child" {
    let started = ContinuousClock.now
    let store = try EarthquakeStore(path: arguments[3])
    let summary = try await GetEarthquakes(source: .url(URL(fileURLWithPath: arguments[2])), store: store).run()
    let elapsed = ContinuousClock.now - started
    let seconds = elapsed / .seconds(1)
    print(
        #"{"seconds":\#(seconds),"peak_rss_mb":\#(peakRSSMegabytes()),"inserted":\#(summary.inserted),"#
            + #""updated":\#(summary.updated),"unchanged":\#(summary.unchanged)}"#)
    exit(0)
}

// MARK: Parent

let quick = arguments.contains("--quick")
let count = quick ? 20_000 : 200_000
let work = FileManager.default.temporaryDirectory.appendingPathComponent("earthquakes-bench-\(UUID().uuidString)")
try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(at: work) }

/// The features to replicate, each as JSON text with its id replaced by `\u{0}`.
func baseFeatures() throws -> (texts: [String], source: String) {
    let here = URL(fileURLWithPath: #filePath)
    let data = here.deletingLastPathComponent().appendingPathComponent("../../../../shared/data/usgs").standardized
    var documents: [Data] = []
    if let names = try? FileManager.default.contentsOfDirectory(atPath: data.path) {
        for name in names.sorted() where name.hasSuffix(".geojson") {
            documents.append(try Data(contentsOf: data.appendingPathComponent(name)))
        }
    }
    let source = documents.isEmpty ? "the built-in sample feed (real USGS data not found)" : "real USGS features"
    if documents.isEmpty { documents = [SampleFeed.geoJSON(count: 500)] }
    var texts: [String] = []
    for document in documents {
        guard let object = try JSONSerialization.jsonObject(with: document) as? [String: Any],
            let features = object["features"] as? [[String: Any]]
        else { continue }
        for var feature in features {
            feature["id"] = "\u{0}"
            let text = String(decoding: try JSONSerialization.data(withJSONObject: feature), as: UTF8.self)
            texts.append(text)
        }
    }
    return (texts, source)
}

let (bases, baseSource) = try baseFeatures()
/// Replicated ids: "q<base index>r<k>", unique for every k.
let ids: [String] = bases.indices.map { "q\($0)" }
let feedFile = work.appendingPathComponent("feed.geojson")
do {
    _ = FileManager.default.createFile(atPath: feedFile.path, contents: nil)
    let handle = try FileHandle(forWritingTo: feedFile)
    var chunk =
        #"{"type":"FeatureCollection","metadata":{"generated":1761800000000,"title":"earthquakes-bench","#
        + #""status":200,"api":"1.14.1","count":\#(count)},"features":["#
    for k in 0..<count {
        let base = bases[k % bases.count]
        if k > 0 { chunk += "," }
        chunk += base.replacingOccurrences(of: "\"\\u0000\"", with: "\"\(ids[k % bases.count])r\(k)\"")
        if chunk.utf8.count > 1 << 20 {
            try handle.write(contentsOf: Data(chunk.utf8))
            chunk = ""
        }
    }
    chunk += "]}"
    try handle.write(contentsOf: Data(chunk.utf8))
    // On disk before anything is timed: otherwise the first run (the Swift import) competes with the
    // kernel writing these 137 MB back, and the later ones do not.
    try handle.synchronize()
    try handle.close()
}
let fileSize = (try FileManager.default.attributesOfItem(atPath: feedFile.path)[.size] as? NSNumber)?.intValue ?? 0

let pythonScript = """
    import json, resource, sqlite3, sys, time
    start = time.perf_counter()
    with open(sys.argv[1], "rb") as f:
        feed = json.load(f)
    db = sqlite3.connect(sys.argv[2])
    db.execute("CREATE TABLE IF NOT EXISTS earthquake (id TEXT PRIMARY KEY NOT NULL, latitude REAL NOT NULL, longitude REAL NOT NULL, depth REAL NOT NULL, magnitude REAL, magnitudeType TEXT, place TEXT, time INTEGER, updated INTEGER, timeZoneOffset INTEGER, url TEXT, detailURL TEXT, felt INTEGER, cdi REAL, mmi REAL, alert TEXT, status TEXT, tsunami INTEGER, significance INTEGER, network TEXT, code TEXT, type TEXT, title TEXT)")
    db.execute("CREATE INDEX IF NOT EXISTS earthquake_time ON earthquake(time)")
    db.execute("CREATE INDEX IF NOT EXISTS earthquake_magnitude ON earthquake(magnitude)")
    rows = []
    for f in feed["features"]:
        p, c = f["properties"], f["geometry"]["coordinates"]
        rows.append((f["id"], c[1], c[0], c[2], p.get("mag"), p.get("magType"), p.get("place"), p.get("time"), p.get("updated"), p.get("tz"), p.get("url"), p.get("detail"), p.get("felt"), p.get("cdi"), p.get("mmi"), p.get("alert"), p.get("status"), p.get("tsunami"), p.get("sig"), p.get("net"), p.get("code"), p.get("type"), p.get("title")))
    db.executemany("INSERT OR REPLACE INTO earthquake VALUES (" + ",".join("?" * 23) + ")", rows)
    db.commit()
    print(json.dumps({"seconds": time.perf_counter() - start, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
    """

struct Measurement: Decodable {
    var seconds: Double
    var peak_rss_mb: Double
    var unchanged: Int?
    var inserted: Int?
}

func runChild(_ executable: String, _ childArguments: [String]) throws -> Measurement {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = childArguments
    let output = Pipe()
    process.standardOutput = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    guard process.terminationStatus == 0, let line = data.split(separator: UInt8(ascii: "\n")).last else {
        throw CocoaError(.executableLoad, userInfo: [NSLocalizedDescriptionKey: "\(executable) failed"])
    }
    return try JSONDecoder().decode(Measurement.self, from: Data(line))
}

let python =
    ["/usr/bin/python3", "/usr/local/bin/python3"].first { FileManager.default.isExecutableFile(atPath: $0) }
    ?? ProcessInfo.processInfo.environment["PATH"].flatMap { path in
        path.split(separator: ":").map { "\($0)/python3" }.first { FileManager.default.isExecutableFile(atPath: $0) }
    }
let me = URL(fileURLWithPath: arguments[0]).path
let swiftDatabase = work.appendingPathComponent("swift.sqlite").path
let first = try runChild(me, ["--import-child", feedFile.path, swiftDatabase])
let again = try runChild(me, ["--import-child", feedFile.path, swiftDatabase])
var pythonResult: Measurement?
if let python {
    pythonResult = try runChild(
        python, ["-c", pythonScript, feedFile.path, work.appendingPathComponent("py.sqlite").path])
}

func number(_ value: Double) -> String { String(format: "%.3f", value) }
print(
    #"{"workload":"earthquakes-import","features":\#(count),"file_mb":\#(number(Double(fileSize) / 1_048_576)),"#
        + #""source":"\#(baseSource)","swift_s":\#(number(first.seconds)),"swift_peak_mb":\#(number(first.peak_rss_mb)),"#
        + #""swift_reimport_s":\#(number(again.seconds)),"reimport_unchanged":\#(again.unchanged ?? -1),"#
        + #""reimport_speedup":\#(number(first.seconds / again.seconds))"#
        + (pythonResult.map {
            #","python_s":\#(number($0.seconds)),"python_peak_mb":\#(number($0.peak_rss_mb)),"#
                + #""time_ratio_swift_over_python":\#(number(first.seconds / $0.seconds)),"#
                + #""memory_ratio_swift_over_python":\#(number(first.peak_rss_mb / $0.peak_rss_mb))"#
        } ?? #","python":"python3 not found""#) + "}")
if let py = pythonResult {
    print(
        "earthquakes import of \(count) features (\(number(Double(fileSize) / 1_048_576)) MB): Swift \(number(first.seconds)) s, "
            + "\(Int(first.peak_rss_mb)) MB peak; Python \(number(py.seconds)) s, \(Int(py.peak_rss_mb)) MB peak; "
            + "time ×\(number(first.seconds / py.seconds)) (target ≤ 0.5), memory ×\(number(first.peak_rss_mb / py.peak_rss_mb)) "
            + "(target ≤ 1); re-import unchanged \(number(again.seconds)) s, \(number(first.seconds / again.seconds))× faster (target ≥ 2)"
    )
}
