public import Baton
import BatonObservability
import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// `refresh --timeline PATH --trace PATH`: a picture of the refresh's jobs, recorded by a `JobTimeline`
/// and written as an HTML page (a Gantt chart) and as a Chrome trace (Perfetto, `chrome://tracing`).
public struct RunPicture: Sendable {
    public let htmlPath: String?
    public let tracePath: String?
    let timeline: JobTimeline?

    /// No picture.
    public init() { self.init(timeline: nil, trace: nil) }

    public init(timeline htmlPath: String?, trace tracePath: String?) {
        self.htmlPath = htmlPath
        self.tracePath = tracePath
        timeline = htmlPath != nil || tracePath != nil ? JobTimeline() : nil
    }

    /// For the refresh's queue: the timeline, or `nil` (the default instruments) without a picture.
    public var instruments: [any JobInstrument]? { timeline.map { [$0] } }

    /// Usage errors: a path whose folder does not exist or cannot be written in (the file is written
    /// there only after the refresh, so this is found first), or that is a folder itself. The folder is
    /// the one the path's symbolic links lead to, where ``OutputFile`` writes; what is not a regular file
    /// (a device, a FIFO) is written into, so it needs only to be writable itself.
    public static func check(_ path: String?, option: String) throws(CLIError) {
        guard let path else { return }
        if let problem = OutputFile.problem(path, example: option == "--trace" ? "run.json" : "run.html") {
            throw CLIError.usage("\(option) \(path)\(problem)")
        }
    }

    /// Usage errors, checked before a refresh does anything: a picture path that is a folder, or that
    /// names a file the refresh reads or writes — the database (its SQLite side files, its sample
    /// database, its job store), a feed file — or the other picture. Paths are compared after
    /// resolving `..`, `.` and symbolic links, so another spelling of the same file is caught too.
    public func check(database: String, feeds: [String]) throws(CLIError) {
        try Self.check(htmlPath, option: "--timeline")
        try Self.check(tracePath, option: "--trace")
        let databaseFiles =
            ["", "-wal", "-shm", "-journal", ".jobs", ".jobs-wal", ".jobs-shm", ".jobs-journal"]
            .map { (database + $0, "the database \(database)") }
            + [(DatabaseLocation.samplePath(forDatabase: database), "the sample database")]
        var feedFiles: [(String, String)] = []
        for feed in feeds {
            if case .url(let url)? = try? EarthquakesCLI.source(feed), url.isFileURL {
                feedFiles.append((url.path, "the feed file \(feed)"))
            }
        }
        let pictures = [(htmlPath, "--timeline"), (tracePath, "--trace")].compactMap { path, option in
            path.map { (path: $0, option: option) }
        }
        for (index, picture) in pictures.enumerated() {
            let mine = Self.canonical(picture.path)
            var taken = databaseFiles + feedFiles
            if index == 1 { taken.append((pictures[0].path, "the \(pictures[0].option) file")) }
            for (path, what) in taken where Self.canonical(path) == mine {
                let shown = what.hasPrefix("the database") || what.hasPrefix("the feed") ? what : "\(what) \(path)"
                throw CLIError.usage(
                    "\(picture.option) \(picture.path) would overwrite \(shown); give another path, "
                        + "for example \(picture.option) \(picture.option == "--trace" ? "run.json" : "run.html")")
            }
        }
    }

    /// `path` made absolute and standard, with symbolic links resolved (in its folder when the file
    /// itself does not exist yet).
    static func canonical(_ path: String) -> String {
        let url = URL(fileURLWithPath: OutputFile.followingLinks(path)).standardizedFileURL
        if FileManager.default.fileExists(atPath: url.path) { return url.resolvingSymlinksInPath().path }
        let folder = url.deletingLastPathComponent().resolvingSymlinksInPath()
        return folder.appendingPathComponent(url.lastPathComponent).standardizedFileURL.path
    }

    /// Writes the files asked for and says so on `console`'s standard error. A file that cannot be
    /// written does not stop the other from being written; the error names every file that was not.
    func write(title: String, console: Console) throws(CLIError) {
        guard let timeline else { return }
        let count = timeline.entries.count
        var failures: [String] = []
        for (path, what, text) in [
            (htmlPath, "timeline", htmlPath.map { _ in timeline.html(title: title) }),
            (tracePath, "trace", tracePath.map { _ in timeline.chromeTraceJSON() }),
        ] {
            guard let path, let text else { continue }
            do {
                try OutputFile.write(text, to: path)
            } catch {
                failures.append("could not write the \(what) to \(path): \(error.localizedDescription)")
                continue
            }
            console.error("Wrote the \(what) of \(EarthquakesCLI.counted(count, "job")) to \(path).\n")
        }
        if !failures.isEmpty { throw CLIError(failures.joined(separator: "; ")) }
    }

    /// For a refresh that finished its work: writes the picture, and returns the error to end the command
    /// with if it could not be (the work stands; the caller reports it first, then throws this).
    func writeAfterWork(title: String, console: Console) -> CLIError? {
        do throws(CLIError) {
            try write(title: title, console: console)
            return nil
        } catch {
            return CLIError(
                "the refresh finished (see above), but \(error.message); write the picture to a folder you can "
                    + "write to, with --timeline or --trace")
        }
    }
}
