public import Baton
import BatonObservability
import Foundation

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

    /// Usage errors: a path whose folder does not exist.
    public static func check(_ path: String?, option: String) throws(CLIError) {
        guard let path else { return }
        let folder = URL(fileURLWithPath: path).deletingLastPathComponent().path
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder), isFolder.boolValue else {
            throw CLIError("\(option) \(path): the folder \(folder) does not exist; create it or give another path")
        }
    }

    /// Writes the files asked for and says so on `console`'s standard error.
    func write(title: String, console: Console) throws(CLIError) {
        guard let timeline else { return }
        let count = timeline.entries.count
        for (path, what, text) in [
            (htmlPath, "timeline", htmlPath.map { _ in timeline.html(title: title) }),
            (tracePath, "trace", tracePath.map { _ in timeline.chromeTraceJSON() }),
        ] {
            guard let path, let text else { continue }
            do {
                try text.write(toFile: path, atomically: true, encoding: .utf8)
            } catch {
                throw CLIError("could not write the \(what) to \(path): \(error.localizedDescription)")
            }
            console.error("Wrote the \(what) of \(count) jobs to \(path).\n")
        }
    }
}
