public import Foundation

/// An executable product of the package, found beside the running test bundle (SwiftPM builds the
/// products and the tests into the same folder), for tests that check what only a real process shows:
/// exit statuses and which stream gets what.
public enum BuiltExecutable {
    /// The executable named `name`, or nil when it has not been built beside the tests.
    public static func url(named name: String) -> URL? {
        let folder = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for candidate in [folder, folder.deletingLastPathComponent()] {
            let url = candidate.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: url.path) { return url }
        }
        return nil
    }
}
