import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the tool keeps its databases, and the checks made before one is opened.
///
/// The user's database, in order: the `--database` option; the environment variable
/// ``environmentVariable``; `$XDG_DATA_HOME/baton-earthquakes/earthquakes.sqlite`;
/// `~/.local/share/baton-earthquakes/earthquakes.sqlite`.
///
/// The built-in sample lives in a database of its own, ``sampleFileName`` in the same folder, so
/// made-up events never mix with real ones.
///
/// ## Thread safety
/// Stateless.
public enum DatabaseLocation {
    /// The environment variable that overrides the default location.
    public static let environmentVariable = "BATON_EARTHQUAKES_DATABASE"

    /// The folder under the data home.
    public static let folderName = "baton-earthquakes"

    /// The file name of the sample database, next to the user's database.
    public static let sampleFileName = "earthquakes-sample.sqlite"

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
            dataHome = (home(environment) as NSString).appendingPathComponent(".local/share")
        }
        return ((dataHome as NSString).appendingPathComponent(folderName) as NSString)
            .appendingPathComponent("earthquakes.sqlite")
    }

    /// `--database ""` is a usage error (it used to mean the default database, silently).
    public static func checkOption(_ option: String?) throws(CLIError) {
        if let option, option.trimmingCharacters(in: .whitespaces).isEmpty {
            throw CLIError.usage(
                "--database is empty; give a database file path, or leave the option out for the default database")
        }
    }

    /// The sample database that goes with the database at `databasePath`: ``sampleFileName`` in its folder.
    public static func samplePath(forDatabase databasePath: String) -> String {
        ((databasePath as NSString).deletingLastPathComponent as NSString).appendingPathComponent(sampleFileName)
    }

    /// Checks that a read command can open `path`: it exists and is a file. Never creates anything.
    ///
    /// - Throws: ``CLIError`` naming the path and what to do.
    public static func checkReadable(_ path: String) throws(CLIError) {
        var isFolder: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) else {
            throw CLIError(
                "there is no database at \(path); `earthquakes refresh` creates it, or give the right file with --database"
            )
        }
        if isFolder.boolValue { throw folderError(path) }
    }

    /// Checks that a command can write to `path` before any download, creating its folder if needed.
    ///
    /// - Parameter explicit: whether the user named the path (`--database` or the environment
    ///   variable); when not, a failure suggests naming one.
    /// - Throws: ``CLIError`` saying what is wrong (a folder, a read-only file or folder, a folder that
    ///   cannot be created) and how to fix it.
    public static func prepareForWriting(_ path: String, explicit: Bool) throws(CLIError) {
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            if isFolder.boolValue { throw folderError(path) }
            if access(path, W_OK) != 0 {
                throw readOnlyError(path, reason: String(cString: strerror(errno)))
            }
            // A side file SQLite cannot write stops every write as surely as the file itself (a `-shm` that
            // an older version's read left with the database's read-only permissions, say).
            let sideFiles = ["-wal", "-shm"].map { path + $0 }.filter {
                FileManager.default.fileExists(atPath: $0) && access($0, W_OK) != 0
            }
            if !sideFiles.isEmpty {
                throw CLIError(
                    "the database \(path) cannot be changed: SQLite's side file\(sideFiles.count == 1 ? "" : "s") "
                        + "\(sideFiles.joined(separator: " and ")) \(sideFiles.count == 1 ? "is" : "are") read-only; "
                        + "make \(sideFiles.count == 1 ? "it" : "them") writable (chmod u+w \(sideFiles.joined(separator: " "))) "
                        + "or give another database with --database")
            }
        }
        let folder = (path as NSString).deletingLastPathComponent
        guard !folder.isEmpty else { return }
        do {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        } catch {
            let hint =
                explicit
                ? "give a database in a writable folder with --database PATH"
                : "give a database in a writable folder with --database PATH or $\(environmentVariable)"
            throw CLIError(
                "cannot create the folder \(folder) for the database (\(Self.reason(for: error))); \(hint)"
            )
        }
        // SQLite writes a journal next to the database: the folder must be writable too.
        if access(folder, W_OK) != 0 {
            throw CLIError(
                "the folder \(folder) is read-only (\(String(cString: strerror(errno)))), so the database \(path) cannot be changed; make the folder writable or give another database with --database"
            )
        }
    }

    /// The message for a database that cannot be written: the command that makes it writable names the
    /// file (and SQLite's side files beside it that are read-only too).
    public static func readOnlyError(_ path: String, reason: String? = nil) -> CLIError {
        let why = reason.map { " (\($0))" } ?? ""
        let files = [path] + ["-wal", "-shm"].map { path + $0 }.filter { FileManager.default.fileExists(atPath: $0) }
        return CLIError(
            "the database \(path) is read-only\(why); make it writable (chmod u+w \(files.joined(separator: " "))) "
                + "or give another database with --database"
        )
    }

    private static func folderError(_ path: String) -> CLIError {
        CLIError(
            "the database \(path) is a folder; give a file path such as \((path as NSString).appendingPathComponent("earthquakes.sqlite"))"
        )
    }

    private static func reason(for error: any Error) -> String {
        let nsError = error as NSError
        if let posix = nsError.userInfo[NSUnderlyingErrorKey] as? NSError, posix.domain == NSPOSIXErrorDomain {
            return String(cString: strerror(Int32(posix.code)))
        }
        if nsError.domain == NSCocoaErrorDomain {
            switch nsError.code {
            case NSFileWriteNoPermissionError: return "permission denied"
            case NSFileWriteFileExistsError: return "a file is in the way"
            default: break
            }
        }
        return nsError.localizedDescription
    }

    private static func home(_ environment: [String: String]) -> String {
        environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    }

    private static func expandTilde(_ path: String, environment: [String: String]) -> String {
        guard path == "~" || path.hasPrefix("~/") else { return path }
        return home(environment) + path.dropFirst()
    }
}
