import Foundation

/// Where the tool keeps its database.
///
/// In order: the `--database` option; the environment variable ``environmentVariable``;
/// `$XDG_DATA_HOME/baton-earthquakes/earthquakes.sqlite`; `~/.local/share/baton-earthquakes/earthquakes.sqlite`.
///
/// ## Thread safety
/// Stateless.
public enum DatabaseLocation {
    /// The environment variable that overrides the default location.
    public static let environmentVariable = "BATON_EARTHQUAKES_DATABASE"

    /// The folder under the data home.
    public static let folderName = "baton-earthquakes"

    /// The database path to use.
    ///
    /// - Parameters:
    ///   - option: The `--database` value, if given.
    ///   - environment: The process environment.
    public static func path(option: String?, environment: [String: String]) -> String {
        if let option, !option.isEmpty { return expandTilde(option, environment: environment) }
        if let variable = environment[environmentVariable], !variable.isEmpty {
            return expandTilde(variable, environment: environment)
        }
        let dataHome: String
        if let xdg = environment["XDG_DATA_HOME"], xdg.hasPrefix("/") {
            dataHome = xdg
        } else {
            let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
            dataHome = (home as NSString).appendingPathComponent(".local/share")
        }
        return ((dataHome as NSString).appendingPathComponent(folderName) as NSString)
            .appendingPathComponent("earthquakes.sqlite")
    }

    /// Creates the folder that holds `path`, if needed.
    ///
    /// - Throws: ``CLIError`` naming the folder.
    public static func createFolder(for path: String) throws(CLIError) {
        let folder = (path as NSString).deletingLastPathComponent
        guard !folder.isEmpty else { return }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            throw CLIError("cannot create the database folder \(folder): \(error.localizedDescription)")
        }
    }

    private static func expandTilde(_ path: String, environment: [String: String]) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        let home = environment["HOME"] ?? NSHomeDirectory()
        return home + path.dropFirst()
    }
}
